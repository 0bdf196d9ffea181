package metadata

import (
	"strconv"
	"strings"
)

// maxListed bounds how many references a reason names.
const maxListed = 5

// maxNameInReason bounds each name a reason quotes, in bytes.
const maxNameInReason = 128

// DescribeMissing returns the reason for an item held because refs do not
// resolve: "references missing object account", "references missing
// object Account, object users and 3 more". However many references are
// missing, the reason stays short (at most five, each name shortened), so
// a hostile body cannot flood logs or reports through it. refs are named in
// the order given.
func DescribeMissing(refs []Reference) string {
	var b strings.Builder
	b.WriteString("references missing ")
	n := min(len(refs), maxListed)
	for i, r := range refs[:n] {
		switch {
		case i == 0:
		case i == n-1 && len(refs) == n:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(r.Kind))
		b.WriteByte(' ')
		b.WriteString(shorten(r.Name))
	}
	if more := len(refs) - n; more > 0 {
		b.WriteString(" and ")
		b.WriteString(strconv.Itoa(more))
		b.WriteString(" more")
	}
	return b.String()
}

// shorten cuts s to maxNameInReason bytes on a rune boundary.
func shorten(s string) string {
	if len(s) <= maxNameInReason {
		return s
	}
	cut := maxNameInReason
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
