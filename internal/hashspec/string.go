package hashspec

import (
	"unicode/utf8"
)

// Decoded strings are held as WTF-8: UTF-8 that may also encode a lone
// surrogate (U+D800 … U+DFFF) as the three bytes ED A0…BF 80…BF, which is
// how a JavaScript string's lone surrogate is kept through sorting and
// printing. A surrogate pair from two \u escapes is one character, encoded
// as UTF-8.

// string reads the JSON string at p.pos. When its raw bytes are its
// canonical text (no escape, well-formed UTF-8) it returns them without
// copying; otherwise it appends the decoded value to *dst as WTF-8 and
// returns nil.
func (p *parser) string(dst *[]byte) ([]byte, error) {
	p.pos++ // opening quote
	start := p.pos
	// Most strings are plain ASCII: skip those bytes in a tight loop on
	// locals, then look at what stopped it.
	in, i := p.in, start
	for i < len(in) && plainASCII(in[i]) {
		i++
	}
	if i < len(in) && in[i] == '"' {
		p.pos = i + 1
		return in[start:i], nil
	}
	p.pos = i
	ascii := true
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			raw := p.in[start:p.pos]
			if ascii || utf8.Valid(raw) {
				p.pos++
				return raw, nil
			}
			break
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, p.fail("in a string")
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		p.pos++
	}
	p.pos = start
	d := *dst
	for {
		if p.pos >= len(p.in) {
			return nil, p.fail("in a string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			*dst = d
			return nil, nil
		case c == '\\':
			var err error
			if d, err = p.escape(d); err != nil {
				return nil, err
			}
		case c < 0x20:
			return nil, p.fail("in a string")
		case c < utf8.RuneSelf:
			d = append(d, c)
			p.pos++
		default:
			n, ok := utf8Seq(p.in[p.pos:])
			if ok {
				d = append(d, p.in[p.pos:p.pos+n]...)
			} else {
				d = append(d, "\uFFFD"...)
			}
			p.pos += n
		}
	}
}

// plainASCII reports whether c stands for itself in a JSON string and in
// its canonical text.
func plainASCII(c byte) bool { return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' }

// escape decodes the escape sequence at p.pos onto d.
func (p *parser) escape(d []byte) ([]byte, error) {
	p.pos++ // backslash
	if p.pos >= len(p.in) {
		return d, p.fail("in a string escape")
	}
	c := p.in[p.pos]
	switch c {
	case '"', '\\', '/':
		d = append(d, c)
	case 'b':
		d = append(d, '\b')
	case 'f':
		d = append(d, '\f')
	case 'n':
		d = append(d, '\n')
	case 'r':
		d = append(d, '\r')
	case 't':
		d = append(d, '\t')
	case 'u':
		u, ok := hex4(p.in[p.pos+1:])
		if !ok {
			return d, p.fail("in a \\u escape")
		}
		p.pos += 5
		if u >= 0xD800 && u < 0xDC00 && len(p.in)-p.pos >= 6 && p.in[p.pos] == '\\' && p.in[p.pos+1] == 'u' {
			if lo, ok := hex4(p.in[p.pos+2:]); ok && lo >= 0xDC00 && lo < 0xE000 {
				p.pos += 6
				return utf8.AppendRune(d, 0x10000+(u-0xD800)<<10+(lo-0xDC00)), nil
			}
		}
		return appendWTF8(d, u), nil
	default:
		return d, p.fail("in a string escape")
	}
	p.pos++
	return d, nil
}

// appendWTF8 appends a BMP code point, a lone surrogate included.
func appendWTF8(d []byte, u rune) []byte {
	if u < 0xD800 || u > 0xDFFF {
		return utf8.AppendRune(d, u)
	}
	return append(d, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// utf8Seq looks at the UTF-8 sequence starting b (b[0] >= 0x80). It
// returns the length of a well-formed sequence and true, or the length of
// the maximal ill-formed subpart there and false: the bytes a WHATWG UTF-8
// decoder (Node's) replaces with one U+FFFD.
func utf8Seq(b []byte) (int, bool) {
	c := b[0]
	need := 0
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1, false
	}
	for i := 1; i <= need; i++ {
		if i >= len(b) || b[i] < lo || b[i] > hi {
			return i, false
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, true
}

// appendString appends the WTF-8 string s as JSON.stringify writes it.
func appendString(out, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != 0xED {
			i++
			continue
		}
		if c == 0xED {
			if s[i+1] < 0xA0 { // U+D000 … U+D7FF
				i += 3
				continue
			}
			u := rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
			out = append(out, s[start:i]...)
			out = append(out, '\\', 'u', hexDigits[u>>12], hexDigits[u>>8&0xF], hexDigits[u>>4&0xF], hexDigits[u&0xF])
			i += 3
			start = i
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// compareUTF16 compares two WTF-8 strings as JavaScript compares strings:
// by UTF-16 code units.
func compareUTF16(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if n == len(a) || n == len(b) {
		return len(a) - len(b) // a prefix sorts first
	}
	// Both differ inside the character that starts at s.
	s := n
	for s > 0 && a[s]&0xC0 == 0x80 {
		s--
	}
	if a[s] < 0xED && b[s] < 0xED {
		// Both below U+D000: UTF-8 byte order is code unit order.
		return int(a[n]) - int(b[n])
	}
	ua, na := firstUnit(a[s:])
	ub, nb := firstUnit(b[s:])
	if ua != ub {
		return int(ua) - int(ub)
	}
	// Equal first units of different characters (an astral character and
	// its high surrogate alone, or two astral characters): compare the
	// units that follow. Rare enough to allocate.
	return compareUnits(restUnits(a[s:], na), restUnits(b[s:], nb))
}

// firstUnit returns the first UTF-16 code unit of the WTF-8 character at
// the start of s and the character's length in bytes.
func firstUnit(s []byte) (uint16, int) {
	r, n := decodeWTF8(s)
	if r >= 0x10000 {
		return uint16(0xD800 + (r-0x10000)>>10), n
	}
	return uint16(r), n
}

// decodeWTF8 decodes the character at the start of the WTF-8 string s.
func decodeWTF8(s []byte) (rune, int) {
	c := s[0]
	switch {
	case c < 0x80:
		return rune(c), 1
	case c < 0xE0:
		return rune(c&0x1F)<<6 | rune(s[1]&0x3F), 2
	case c < 0xF0:
		return rune(c&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	return rune(c&0x07)<<18 | rune(s[1]&0x3F)<<12 | rune(s[2]&0x3F)<<6 | rune(s[3]&0x3F), 4
}

// restUnits returns the UTF-16 code units of s after the first unit of its
// first character (n bytes long).
func restUnits(s []byte, n int) []uint16 {
	var units []uint16
	if n == 4 {
		r, _ := decodeWTF8(s)
		units = append(units, uint16(0xDC00+(r-0x10000)&0x3FF))
	}
	for i := n; i < len(s); {
		r, m := decodeWTF8(s[i:])
		if r >= 0x10000 {
			units = append(units, uint16(0xD800+(r-0x10000)>>10), uint16(0xDC00+(r-0x10000)&0x3FF))
		} else {
			units = append(units, uint16(r))
		}
		i += m
	}
	return units
}

func compareUnits(a, b []uint16) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}
