package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// clean makes a string that came from a row (a key, a reason, a replica's
// name) safe to print in a table on a terminal: control characters (escape
// sequences, newlines and tabs that would forge rows or columns), Unicode
// format characters (bidirectional overrides, zero-width characters) and
// invalid UTF-8 are printed as Go escapes (\x1b, \n, \u202e) instead of
// being sent to the terminal. --json output is JSON and needs none of it.
func clean(s string) string {
	if !needsCleaning(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

func needsCleaning(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unicode.IsControl(r) || unsafeRune(r) {
			return true
		}
		i += n
	}
	return false
}

// unsafeRune reports C1 controls and format characters (Cf: bidi
// overrides and isolates, zero-width joiners and spaces, soft hyphens)
// and line and paragraph separators.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
