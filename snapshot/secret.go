package snapshot

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Secret is a credential value. Every way of printing it prints a
// placeholder; only Reveal returns the value.
type Secret struct{ v string }

// NewSecret wraps a credential value.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the value, for the one place that must send it upstream.
func (s Secret) Reveal() string { return s.v }

// IsEmpty reports whether the value is empty.
func (s Secret) IsEmpty() bool { return s.v == "" }

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

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
