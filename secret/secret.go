package secret

import (
	"fmt"
	"log/slog"
)

// Secret is a credential value. Every way of printing it prints a
// placeholder; only Reveal returns the value.
//
// The value sits behind a pointer to a string: fmt prints a struct's
// unexported fields by reflection, without calling their methods, and it
// prints such a pointer as an address under every verb (a pointer to a
// struct would be followed), so a Secret held in an unexported field of
// another struct shows an address, never the value.
type Secret struct{ p *string }

// New wraps a credential value.
func New(v string) Secret { return Secret{p: &v} }

// Reveal returns the value, for the one place that must send it upstream.
func (s Secret) Reveal() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsEmpty reports whether the value is empty.
func (s Secret) IsEmpty() bool { return s.Reveal() == "" }

const redacted = "[REDACTED]"

// String implements fmt.Stringer without the value.
func (s Secret) String() string { return redacted }

// GoString implements fmt.GoStringer without the value.
func (s Secret) GoString() string { return redacted }

// Format implements fmt.Formatter so that no verb prints the value.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue implements slog.LogValuer without the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON implements json.Marshaler without the value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler without the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
