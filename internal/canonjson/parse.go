package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// Canonical returns the canonical form of the JSON document b. It parses b
// once, writing as it goes; only objects whose keys are out of order are
// rearranged.
func Canonical(b []byte) ([]byte, error) {
	p := parser{in: b}
	var out bytes.Buffer
	out.Grow(len(b))
	p.space()
	if err := p.value(&out, 0); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	p.space()
	if p.pos != len(p.in) {
		return nil, fmt.Errorf("canonical json: trailing data after document at offset %d", p.pos)
	}
	return out.Bytes(), nil
}

type parser struct {
	in  []byte
	pos int
	// members is a stack of the members of the objects being parsed, and
	// scratch a buffer for rearranging one: both reused across objects.
	members []member
	scratch []byte
}

var errEnd = errors.New("unexpected end of input")

func (p *parser) space() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) fail(what string) error {
	if p.pos >= len(p.in) {
		return errEnd
	}
	return fmt.Errorf("invalid character %q %s at offset %d", p.in[p.pos], what, p.pos)
}

func (p *parser) value(out *bytes.Buffer, depth int) error {
	if p.pos >= len(p.in) {
		return errEnd
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		raw, s, err := p.str()
		if err != nil {
			return err
		}
		if raw != nil { // printed as written
			out.WriteByte('"')
			out.Write(raw)
			out.WriteByte('"')
			return nil
		}
		writeString(out, s)
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		n, err := p.number()
		if err != nil {
			return err
		}
		if plainInteger(n) { // printed as written
			out.Write(n)
			return nil
		}
		writeNumber(out, json.Number(n))
		return nil
	default:
		for _, lit := range literals {
			if bytes.HasPrefix(p.in[p.pos:], lit) {
				p.pos += len(lit)
				out.Write(lit)
				return nil
			}
		}
		return p.fail("looking for beginning of value")
	}
}

var literals = [][]byte{[]byte("true"), []byte("false"), []byte("null")}

// plainInteger reports whether n prints the same in ECMAScript: an integer
// of at most 15 digits, not negative zero.
func plainInteger(n []byte) bool {
	d := n
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
		if len(d) == 1 && d[0] == '0' {
			return false
		}
	}
	if len(d) == 0 || len(d) > 15 {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// member is one written object member: its decoded key and where its
// canonical "key":value bytes stand in the output.
type member struct {
	key        []byte
	start, end int
}

func compareMembers(a, b member) int { return bytes.Compare(a.key, b.key) }

func (p *parser) object(out *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	p.pos++ // {
	start := out.Len()
	out.WriteByte('{')
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		out.WriteByte('}')
		return nil
	}
	for {
		p.space()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.fail("looking for beginning of object key string")
		}
		raw, decoded, err := p.str()
		if err != nil {
			return err
		}
		p.space()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.fail("after object key")
		}
		p.pos++
		p.space()
		if len(p.members) > base {
			out.WriteByte(',')
		}
		m := member{key: raw, start: out.Len()}
		if raw != nil {
			out.WriteByte('"')
			out.Write(raw)
			out.WriteByte('"')
		} else {
			m.key = []byte(decoded)
			writeString(out, decoded)
		}
		out.WriteByte(':')
		if err := p.value(out, depth); err != nil {
			return err
		}
		m.end = out.Len()
		p.members = append(p.members, m)
		p.space()
		if p.pos >= len(p.in) {
			return errEnd
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return p.fail("after object key:value pair")
		}
		p.pos++
		break
	}
	out.WriteByte('}')
	members := p.members[base:]
	if slices.IsSortedFunc(members, compareMembers) && !hasDup(members) {
		return nil
	}
	// Rearrange: sort by key (stable, so the last duplicate stays last),
	// keep the last of each duplicate key, as a decoded map would.
	p.scratch = append(p.scratch[:0], out.Bytes()[start:]...)
	slices.SortStableFunc(members, compareMembers)
	out.Truncate(start)
	out.WriteByte('{')
	first := true
	for i, m := range members {
		if i+1 < len(members) && bytes.Equal(members[i+1].key, m.key) {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		out.Write(p.scratch[m.start-start : m.end-start])
	}
	out.WriteByte('}')
	return nil
}

func hasDup(sorted []member) bool {
	for i := 1; i < len(sorted); i++ {
		if bytes.Equal(sorted[i].key, sorted[i-1].key) {
			return true
		}
	}
	return false
}

func (p *parser) array(out *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	p.pos++ // [
	out.WriteByte('[')
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		out.WriteByte(']')
		return nil
	}
	for i := 0; ; i++ {
		p.space()
		if i > 0 {
			out.WriteByte(',')
		}
		if err := p.value(out, depth); err != nil {
			return err
		}
		p.space()
		if p.pos >= len(p.in) {
			return errEnd
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != ']' {
			return p.fail("after array element")
		}
		p.pos++
		out.WriteByte(']')
		return nil
	}
}

// str parses a JSON string at p.pos. When its raw bytes are also its
// canonical form (no escapes, valid UTF-8) it returns them as raw, without
// copying; otherwise it returns the decoded value, where invalid UTF-8 and
// lone surrogates become U+FFFD, as encoding/json decodes them.
func (p *parser) str() (raw []byte, s string, err error) {
	p.pos++ // opening quote
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			r := p.in[start:p.pos]
			p.pos++
			if utf8.Valid(r) {
				return r, "", nil
			}
			return nil, validUTF8(string(r)), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, "", p.fail("in string literal")
		}
		p.pos++
	}
	var sb strings.Builder
	sb.Write(p.in[start:p.pos])
	for {
		if p.pos >= len(p.in) {
			return nil, "", errEnd
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return nil, validUTF8(sb.String()), nil
		case c < 0x20:
			return nil, "", p.fail("in string literal")
		case c != '\\':
			sb.WriteByte(c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.in) {
			return nil, "", errEnd
		}
		e := p.in[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, "", p.fail("in \\u hexadecimal character escape")
			}
			if utf16.IsSurrogate(r) {
				// A valid pair decodes to one rune; anything else is U+FFFD.
				save := p.pos
				if p.pos+1 < len(p.in) && p.in[p.pos] == '\\' && p.in[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok := p.hex4(); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							sb.WriteRune(dec)
							continue
						}
					}
				}
				p.pos = save
				r = utf8.RuneError
			}
			sb.WriteRune(r)
		default:
			p.pos--
			return nil, "", p.fail("in string escape code")
		}
	}
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// number parses a JSON number (RFC 8259 grammar) and returns its text.
func (p *parser) number() ([]byte, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.in[p.pos] == '-' {
		p.pos++
	}
	if p.pos >= len(p.in) {
		return nil, errEnd
	}
	if p.in[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return nil, p.fail("in numeric literal")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail("after decimal point in numeric literal")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail("in exponent of numeric literal")
		}
	}
	return p.in[start:p.pos], nil
}

// validUTF8 replaces each invalid byte of s with U+FFFD, as encoding/json
// does when it decodes a string.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.WriteString(s[i : i+size])
		}
		i += size
	}
	return sb.String()
}
