package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// ErrBody is the cause of every fault found in a body (errors.Is).
var ErrBody = errors.New("invalid body")

// Fault is one fault in a body; its message names the member.
type Fault struct{ Msg string }

func (f *Fault) Error() string { return f.Msg }

// Unwrap returns ErrBody.
func (f *Fault) Unwrap() error { return ErrBody }

// Faultf returns a Fault.
func Faultf(format string, args ...any) error { return &Fault{Msg: fmt.Sprintf(format, args...)} }

// Object is a decoded JSON object whose members are still raw.
type Object struct {
	path string
	m    map[string]json.RawMessage
}

// Decode decodes b as one JSON object called path ("body", "config").
func Decode(b []byte, path string) (Object, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return Object{}, Faultf("%s must be a JSON object", path)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return Object{}, Faultf("%s is not valid JSON: %v", path, err)
	}
	return Object{path: path, m: m}, nil
}

// DecodeRoot decodes b as the top-level object called what ("body"):
// its members' paths are their bare names.
func DecodeRoot(b []byte, what string) (Object, error) {
	o, err := Decode(b, what)
	o.path = ""
	return o, err
}

// Path returns the member path of key.
func (o Object) Path(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// Has reports whether key is present and not null.
func (o Object) Has(key string) bool {
	raw, ok := o.m[key]
	return ok && string(bytes.TrimSpace(raw)) != "null"
}

// Len is the number of members.
func (o Object) Len() int { return len(o.m) }

// String reads key as a non-empty string; ok is false when absent or null.
func (o Object) String(key string) (s string, ok bool, err error) {
	if !o.Has(key) {
		return "", false, nil
	}
	if err := json.Unmarshal(o.m[key], &s); err != nil {
		return "", false, Faultf("%s must be a string", o.Path(key))
	}
	if s == "" {
		return "", false, Faultf("%s must not be empty", o.Path(key))
	}
	return s, true, nil
}

// Required reads key as a non-empty string that must be present.
func (o Object) Required(key string) (string, error) {
	s, ok, err := o.String(key)
	if err == nil && !ok {
		err = Faultf("%s is required", o.Path(key))
	}
	return s, err
}

// Bool reads key as a boolean.
func (o Object) Bool(key string) (b bool, ok bool, err error) {
	if !o.Has(key) {
		return false, false, nil
	}
	if err := json.Unmarshal(o.m[key], &b); err != nil {
		return false, false, Faultf("%s must be true or false", o.Path(key))
	}
	return b, true, nil
}

// Int reads key as an integer in [lo, hi].
func (o Object) Int(key string, lo, hi int64) (n int64, ok bool, err error) {
	if !o.Has(key) {
		return 0, false, nil
	}
	if err := json.Unmarshal(o.m[key], &n); err != nil {
		return 0, false, Faultf("%s must be an integer", o.Path(key))
	}
	if n < lo || n > hi {
		return 0, false, Faultf("%s must be between %d and %d", o.Path(key), lo, hi)
	}
	return n, true, nil
}

// Duration reads key as a positive duration string ("5s", "30m").
func (o Object) Duration(key string) (d time.Duration, ok bool, err error) {
	s, ok, err := o.String(key)
	if err != nil || !ok {
		if err != nil {
			err = Faultf("%s must be a duration like \"5s\"", o.Path(key))
		}
		return 0, false, err
	}
	d, perr := time.ParseDuration(s)
	if perr != nil || d <= 0 {
		return 0, false, Faultf("%s must be a positive duration like \"5s\"", o.Path(key))
	}
	return d, true, nil
}

// Object reads key as a nested object.
func (o Object) Object(key string) (Object, bool, error) {
	if !o.Has(key) {
		return Object{path: o.Path(key)}, false, nil
	}
	n, err := Decode(o.m[key], o.Path(key))
	return n, err == nil, err
}

// Only returns a fault naming the first member (in sorted order) that is
// not one of known.
func (o Object) Only(known ...string) error {
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return Faultf("%s is not a known setting", o.Path(k))
		}
	}
	return nil
}
