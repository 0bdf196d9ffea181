package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Checksum returns "sha256:<hex>" of the canonical form of b.
func Checksum(b []byte) (string, error) {
	c, err := Canonical(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// writeString writes s as a JSON string the way ECMAScript's
// JSON.stringify does (the platform's writers are JavaScript): only '"',
// '\\' and control characters are escaped; invalid UTF-8 becomes U+FFFD.
func writeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				buf.WriteString(s[start:i])
				buf.WriteString("\ufffd")
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		buf.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		}
		i++
		start = i
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// writeNumber writes n as ECMAScript's Number.prototype.toString would
// (1.50 → 1.5, 1e2 → 100); a number that does not fit a float64 is kept
// as written.
func writeNumber(buf *bytes.Buffer, n json.Number) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		buf.WriteString(string(n))
		return
	}
	if f == 0 {
		buf.WriteByte('0') // -0 prints as 0
		return
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		buf.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
		return
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // 1e+21, 1.5e-07
	mant, exp, _ := strings.Cut(e, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	buf.WriteString(mant)
	buf.WriteByte('e')
	buf.WriteByte(sign)
	buf.WriteString(exp)
}
