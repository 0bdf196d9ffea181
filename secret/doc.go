// Package secret holds the credential value type: a Secret prints a
// placeholder under every verb of fmt, under log/slog, and as JSON or text;
// only Reveal returns the value, for the one place that sends it upstream.
//
// It is a leaf: it imports nothing of this module, so the store (which reads
// credentials), the loop (which resolves them) and the drivers (which send
// them) share one type without importing each other.
package secret
