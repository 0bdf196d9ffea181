package hashspec

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// parser reads one JSON text and appends its canonical form to out as it
// goes: scalars and arrays are final when written; an object's members are
// rearranged in place once the object ends, only when they are not already
// in order.
type parser struct {
	in  []byte
	pos int
	out []byte
	// members is a stack of the members of the objects being read; keys
	// holds the decoded keys that are not a slice of in (those with
	// escapes or ill-formed UTF-8), also as a stack; str holds a decoded
	// string value; scratch is where an object is rearranged.
	members []member
	keys    []byte
	str     []byte
	scratch []byte
	// buf is Checksum's output buffer, kept for the next call.
	buf []byte
	// refused tells that out holds a number the platform refuses.
	refused bool
}

// member is one object member: where its canonical "key":value text
// stands in out, its decoded key and the key's array index. The key is
// held as offsets, not a slice: keys grows while later members are read,
// and a pooled parser must not keep the last body alive.
type member struct {
	start, end int
	// key and keyLen locate the decoded key: in keys when escaped (it had
	// an escape or ill-formed UTF-8), else in in.
	key, keyLen int
	index       int64 // notIndex when the key is not an array index
	escaped     bool
	proto       bool
}

func (p *parser) space() {
	// A loop on locals: the compiler keeps them in registers, not p.pos.
	in, i := p.in, p.pos
	for i < len(in) && isSpace(in[i]) {
		i++
	}
	p.pos = i
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// fail describes what is wrong at the current position.
func (p *parser) fail(what string) error {
	if p.pos >= len(p.in) {
		return fmt.Errorf("%w: unexpected end of input %s", ErrSyntax, what)
	}
	return fmt.Errorf("%w: unexpected character %q %s at offset %d", ErrSyntax, p.in[p.pos], what, p.pos)
}

func (p *parser) value(depth int) error {
	if p.pos >= len(p.in) {
		return p.fail("looking for a value")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		open := p.pos
		p.str = p.str[:0]
		raw, err := p.string(&p.str)
		if err != nil {
			return err
		}
		if raw != nil {
			p.out = append(p.out, p.in[open:p.pos]...) // with its quotes
		} else {
			p.out = appendString(p.out, p.str)
		}
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	return p.fail("looking for a value")
}

func (p *parser) literal(lit string) error {
	if len(p.in)-p.pos < len(lit) || string(p.in[p.pos:p.pos+len(lit)]) != lit {
		return p.fail("in a literal")
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func tooDeep() error {
	return fmt.Errorf("%w: nesting deeper than %d", ErrUnrepresentable, MaxDepth)
}

func (p *parser) array(depth int) error {
	if depth > MaxDepth {
		return tooDeep()
	}
	p.pos++ // [
	p.out = append(p.out, '[')
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for {
		p.space()
		if err := p.value(depth); err != nil {
			return err
		}
		p.space()
		if p.pos >= len(p.in) {
			return p.fail("in an array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return nil
		default:
			return p.fail("after an array element")
		}
	}
}

func (p *parser) object(depth int) error {
	if depth > MaxDepth {
		return tooDeep()
	}
	p.pos++ // {
	start := len(p.out)
	p.out = append(p.out, '{')
	base, keysBase := len(p.members), len(p.keys)
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		return nil
	}
	proto := false
	for {
		p.space()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.fail("looking for an object key")
		}
		open, keyStart := p.pos, len(p.keys)
		raw, err := p.string(&p.keys)
		if err != nil {
			return err
		}
		end := p.pos
		p.space()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.fail("after an object key")
		}
		p.pos++
		p.space()
		if len(p.members) > base {
			p.out = append(p.out, ',')
		}
		// The member is appended once its value is read (the value's own
		// members are pushed first) and filled in place: one built on the
		// stack and copied costs a store-forwarding stall per member.
		memberStart := len(p.out)
		var key []byte
		if raw != nil {
			key = raw
			p.out = append(p.out, p.in[open:end]...) // with its quotes
		} else {
			key = p.keys[keyStart:]
			p.out = appendString(p.out, key)
		}
		keyOff, keyLen, escaped := open+1, len(key), raw == nil
		if escaped {
			keyOff = keyStart
		}
		index, isProto := arrayIndex(key), string(key) == "__proto__"
		proto = proto || isProto
		p.out = append(p.out, ':')
		if err := p.value(depth); err != nil {
			return err
		}
		p.members = append(p.members, member{})
		m := &p.members[len(p.members)-1]
		m.start, m.end = memberStart, len(p.out)
		m.key, m.keyLen, m.index = keyOff, keyLen, index
		m.escaped, m.proto = escaped, isProto
		p.space()
		if p.pos >= len(p.in) {
			return p.fail("in an object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return p.fail("after an object member")
		}
		p.pos++
		break
	}
	p.out = append(p.out, '}')
	members := p.members[base:]
	moved, dup := p.sortMembers(members)
	if moved || dup || proto {
		p.rewrite(start, members, dup)
	}
	// Pop this object's members and keys. (An error above ends the
	// parse, and the next one starts with empty stacks.)
	p.members = p.members[:base]
	p.keys = p.keys[:keysBase]
	return nil
}

// maxInsertionSort is the most members sortMembers sorts by insertion:
// most objects are this small, where it beats slices.SortStableFunc.
const maxInsertionSort = 16

// sortMembers sorts members stably into canonical order (the last of
// duplicates stays last). It reports whether any member moved and
// whether there may be duplicates.
func (p *parser) sortMembers(members []member) (moved, dup bool) {
	for i := 1; i < len(members); i++ {
		c := p.compare(&members[i-1], &members[i])
		if c < 0 {
			continue // in order so far, the common case
		}
		if c == 0 {
			dup = true
			continue
		}
		if len(members) > maxInsertionSort {
			slices.SortStableFunc(members, func(a, b member) int { return p.compare(&a, &b) })
			return true, true
		}
		// Insert members[i] after the last member not greater: a member
		// equal to it is met there, so dup misses none.
		moved = true
		m := members[i]
		j := i - 1
		for j > 0 {
			c := p.compare(&members[j-1], &m)
			if c <= 0 {
				dup = dup || c == 0
				break
			}
			j--
		}
		copy(members[j+1:i+1], members[j:i])
		members[j] = m
	}
	return moved, dup
}

// rewrite writes the object that starts at start in out again, with its
// members in the order of members (sorted), dropping the duplicates that
// a later one replaces, when dup tells there may be some, and
// "__proto__".
func (p *parser) rewrite(start int, members []member, dup bool) {
	p.scratch = append(p.scratch[:0], p.out[start:]...)
	p.out = append(p.out[:start], '{')
	first := true
	for i := range members {
		m := &members[i]
		if dup && i+1 < len(members) && p.compare(&members[i+1], m) == 0 {
			continue // replaced by a later duplicate
		}
		text := p.scratch[m.start-start : m.end-start]
		if m.proto {
			// Dropped, but the platform canonicalizes its value first:
			// keep a refused number's mark.
			p.out = p.keepMark(p.out, text)
			continue
		}
		if !first {
			p.out = append(p.out, ',')
		}
		first = false
		p.out = append(p.out, text...)
	}
	p.out = append(p.out, '}')
}

// keyOf returns the decoded key of m.
func (p *parser) keyOf(m *member) []byte {
	if m.escaped {
		return p.keys[m.key : m.key+m.keyLen]
	}
	return p.in[m.key : m.key+m.keyLen]
}

// compare orders keys as JavaScript enumerates an object's keys after
// inserting them in sorted order: array indices first, ascending, then
// the others in UTF-16 code unit order.
func (p *parser) compare(a, b *member) int {
	if a.index != b.index {
		return cmp.Compare(a.index, b.index) // notIndex is above every index
	}
	if a.index != notIndex {
		return 0
	}
	return compareUTF16(p.keyOf(a), p.keyOf(b))
}

// maxIndex is the largest array index, 2^32 - 2.
const maxIndex = 1<<32 - 2

// notIndex stands for a key that is not an array index; it sorts after
// them all.
const notIndex = math.MaxInt64

// arrayIndex returns the array index a key denotes, or notIndex: the
// canonical decimal of an integer from 0 to 2^32 - 2.
func arrayIndex(k []byte) int64 {
	if len(k) == 0 || len(k) > 10 || (k[0] == '0' && len(k) > 1) {
		return notIndex
	}
	var n int64
	for _, c := range k {
		if c < '0' || c > '9' {
			return notIndex
		}
		n = n*10 + int64(c-'0')
	}
	if n > maxIndex {
		return notIndex
	}
	return n
}

// number reads a JSON number and appends it as JavaScript prints it.
func (p *parser) number() error {
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
	if p.pos < len(p.in) && p.in[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return p.fail("in a number")
	}
	integer := true
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		integer = false
		p.pos++
		if digits() == 0 {
			return p.fail("after a decimal point")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		integer = false
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.fail("in an exponent")
		}
	}
	tok := p.in[start:p.pos]
	if integer && plainInteger(tok) {
		p.out = append(p.out, tok...)
		return nil
	}
	out, err := appendNumber(p.out, tok)
	if err != nil {
		// The platform refuses this number only if it survives
		// JSON.parse: a later duplicate key may replace it, and a syntax
		// error further on is the one JSON.parse reports. So mark its
		// place (0xFF never occurs in canonical text) and read on.
		p.out = append(p.out, refusedMark)
		p.out = strconv.AppendInt(p.out, int64(start), 10)
		p.out = append(p.out, refusedMark)
		p.refused = true
		return nil
	}
	p.out = out
	return nil
}

// refusedMark brackets the input offset of a refused number in out.
const refusedMark = 0xFF

// keepMark appends to out the first refused number's mark in text, if any.
func (p *parser) keepMark(out, text []byte) []byte {
	if !p.refused {
		return out
	}
	i := bytes.IndexByte(text, refusedMark)
	if i < 0 {
		return out
	}
	j := bytes.IndexByte(text[i+1:], refusedMark)
	return append(out, text[i:i+j+2]...)
}

// refusal returns the error for the first refused number left in out (from
// base on), or nil.
func (p *parser) refusal(base int) error {
	if !p.refused {
		return nil
	}
	out := p.out[base:]
	i := bytes.IndexByte(out, refusedMark)
	if i < 0 {
		return nil
	}
	j := bytes.IndexByte(out[i+1:], refusedMark)
	start, _ := strconv.Atoi(string(out[i+1 : i+1+j]))
	tok := p.in[start:]
	n := 0
	for n < len(tok) && n < 40 && strings.IndexByte("+-.0123456789Ee", tok[n]) >= 0 {
		n++
	}
	return fmt.Errorf("%w: the number %s at offset %d is beyond the float64 range", ErrUnrepresentable, tok[:n], start)
}

// plainInteger reports whether an integer token prints as written: at most
// 15 digits (exact in a float64) and not negative zero.
func plainInteger(tok []byte) bool {
	d := tok
	if d[0] == '-' {
		d = d[1:]
		if d[0] == '0' {
			return false
		}
	}
	return len(d) <= 15
}
