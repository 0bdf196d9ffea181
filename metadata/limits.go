package metadata

import (
	"fmt"
	"strconv"
)

// The default caps: what an unset Limits field means.
const (
	DefaultMaxBodyBytes = 1 << 20 // 1 MiB
	DefaultMaxRefs      = 10_000
)

// Limits caps what one item may cost to parse and resolve. A zero field
// means its default; there is no "unlimited".
type Limits struct {
	// MaxBodyBytes caps the body's length in bytes (config key
	// engine.max_body_bytes).
	MaxBodyBytes int64
	// MaxRefs caps the item's distinct references (config key
	// engine.max_refs).
	MaxRefs int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxRefs <= 0 {
		l.MaxRefs = DefaultMaxRefs
	}
	return l
}

// CheckBody returns the fault of a body of n bytes above the cap (a *Fault,
// errors.Is ErrLimit, naming engine.max_body_bytes), nil within it. A
// store that withheld a body too long to read reports its length here.
func (l Limits) CheckBody(n int64) error {
	l = l.withDefaults()
	if n > l.MaxBodyBytes {
		return bodyTooLarge(n, l.MaxBodyBytes)
	}
	return nil
}

func bodyTooLarge(n, limit int64) *Fault {
	got, cap := size(n), size(limit)
	if got == cap { // rounding hid the difference: say it in bytes
		got, cap = strconv.FormatInt(n, 10)+" bytes", strconv.FormatInt(limit, 10)+" bytes"
	}
	return &Fault{Msg: fmt.Sprintf("body is %s, above the %s cap (engine.max_body_bytes)", got, cap), kind: ErrLimit}
}

func tooManyRefs(n, limit int) *Fault {
	return &Fault{Msg: fmt.Sprintf("item has %d references, above the %d cap (engine.max_refs)", n, limit), kind: ErrLimit}
}

// size prints n bytes for people: "512 bytes", "1 MiB", "2.1 MiB".
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v, i := float64(n), -1
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + [...]string{"KiB", "MiB", "GiB"}[i]
}
