package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// Key is one configuration key as the outside sees it: its name, its
// default and its usage line.
type Key struct {
	Name    string
	Default any // string, bool, int or []string
	Usage   string
}

// decl is one row of [declarations]: a key bound to its Config field.
type decl struct {
	Key
	// decode reads the key from v into c's field and checks the value's own
	// rules, recording problems in d.
	decode func(d *decoder, v *viper.Viper, c *Config)
	// addr returns the address of c's field.
	addr func(c *Config) any
	// steps run after every key is decoded: rules that read other keys,
	// and defaults computed from them. An error is the key's problem.
	steps []func(c *Config) error
}

// then adds a step that runs once every key is decoded.
func (k decl) then(step func(c *Config) error) decl {
	k.steps = append(k.steps, step)
	return k
}

// value is the set of Go types a key's field may have.
type value interface {
	string | bool | int | time.Duration | []string | slog.Level
}

// bind declares key name: field is where its value goes, def its default,
// rules what the decoded value must meet (each error becomes a problem of
// the key; rules run only on a value that decoded).
func bind[T value](name string, def any, usage string, field func(*Config) *T, rules ...func(T) error) decl {
	return decl{
		Key: Key{Name: name, Default: def, Usage: usage},
		decode: func(d *decoder, v *viper.Viper, c *Config) {
			before := len(d.errs)
			x := read[T](d, name, v.Get(name))
			*field(c) = x
			if len(d.errs) > before {
				return
			}
			for _, rule := range rules {
				if err := rule(x); err != nil {
					d.fail(name, err.Error())
					return
				}
			}
		},
		addr: func(c *Config) any { return field(c) },
	}
}

// read decodes raw as a T, recording a problem of key in d when it is not.
func read[T value](d *decoder, key string, raw any) T {
	var out any
	var zero T
	switch any(zero).(type) {
	case string:
		out = d.str(key, raw)
	case bool:
		out = d.boolean(key, raw)
	case int:
		out = d.integer(key, raw)
	case time.Duration:
		out = d.duration(key, raw)
	case []string:
		out = d.argv(key, raw)
	case slog.Level:
		out = d.level(key, raw)
	}
	return out.(T)
}

// Keys lists every configuration key with its default, in the order
// config.yaml documents them.
func Keys() []Key {
	ds := declarations()
	out := make([]Key, len(ds))
	for i, d := range ds {
		out[i] = d.Key
	}
	return out
}

func lookupKey(name string) (Key, bool) {
	for _, k := range declarations() {
		if k.Name == name {
			return k.Key, true
		}
	}
	return Key{}, false
}

// Rules shared by several keys.

func atLeast(min time.Duration) func(time.Duration) error {
	return func(d time.Duration) error {
		switch {
		case d < 0:
			return fmt.Errorf("must not be negative, got %s", d)
		case d < min:
			return fmt.Errorf("must be at least %s (a shorter one keeps a core busy), got %s", min, d)
		}
		return nil
	}
}

// atLeastFor accepts a duration of at least min (a floor of meaning, not
// of cost: see atLeast).
func atLeastFor(min time.Duration) func(time.Duration) error {
	return func(d time.Duration) error {
		if d < min {
			return fmt.Errorf("must be at least %s, got %s", min, d)
		}
		return nil
	}
}

func positive(d time.Duration) error {
	if d <= 0 {
		return errors.New("must be greater than zero")
	}
	return nil
}

// offOrAtLeast accepts 0 (off) or a duration of at least min; why says
// what a shorter one would cost.
func offOrAtLeast(min time.Duration, why string) func(time.Duration) error {
	return func(d time.Duration) error {
		if d > 0 && d < min {
			return fmt.Errorf("must be 0 (off) or at least %s (%s), got %s", min, why, d)
		}
		return nil
	}
}

func minInt(min int) func(int) error {
	return func(n int) error {
		if n < min {
			return fmt.Errorf("must be at least %d, got %d", min, n)
		}
		return nil
	}
}

func notEmpty(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	return nil
}

// oneOf accepts one of the words (what names them in the error: "format").
func oneOf(what string, words ...string) func(string) error {
	return func(s string) error {
		for _, w := range words {
			if strings.EqualFold(s, w) {
				return nil
			}
		}
		return fmt.Errorf("unknown %s %q (want %s)", what, s, orList(words))
	}
}

func orList(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
