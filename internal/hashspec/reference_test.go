package hashspec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// This file is a second, independent implementation of the platform's
// checksum, used as the oracle of FuzzCanonical. Where the package works
// on UTF-8 bytes in one pass, this one does what the platform does, step
// by step, in JavaScript's terms: decode the body to UTF-16 code units
// (the WHATWG decoder, as written in its specification), JSON.parse into
// objects that keep JavaScript's property order, canonicalize by
// re-inserting Object.keys(obj).sort(), JSON.stringify, encode as UTF-8.

var (
	errRefSyntax          = errors.New("reference: syntax error")
	errRefUnrepresentable = errors.New("reference: not representable")
)

func refChecksum(body []byte) (string, error) {
	c, err := refCanonical(body)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func refCanonicalOrPanic(body []byte) ([]byte, error) {
	text := whatwgDecode(body)
	r := &jsReader{s: text}
	r.ws()
	v, err := r.value(0)
	if err != nil {
		return nil, err
	}
	r.ws()
	if r.i != len(r.s) {
		return nil, errRefSyntax
	}
	var out []uint16
	out = jsStringify(out, jsNormalise(v))
	return []byte(string(utf16.Decode(out))), nil
}

// whatwgDecode is the UTF-8 decoder of the WHATWG Encoding Standard, step
// by step, producing UTF-16.
func whatwgDecode(b []byte) []uint16 {
	var out []uint16
	var cp rune
	needed, seen := 0, 0
	lower, upper := byte(0x80), byte(0xBF)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if needed == 0 {
			switch {
			case c <= 0x7F:
				out = append(out, uint16(c))
			case c >= 0xC2 && c <= 0xDF:
				needed, cp = 1, rune(c&0x1F)
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				}
				if c == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, rune(c&0xF)
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				}
				if c == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, rune(c&0x7)
			default:
				out = append(out, 0xFFFD)
			}
			continue
		}
		if c < lower || c > upper {
			cp, needed, seen, lower, upper = 0, 0, 0, 0x80, 0xBF
			out = append(out, 0xFFFD)
			i-- // process c again
			continue
		}
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(c&0x3F)
		seen++
		if seen == needed {
			out = utf16.AppendRune(out, cp)
			cp, needed, seen = 0, 0, 0
		}
	}
	if needed != 0 {
		out = append(out, 0xFFFD)
	}
	return out
}

// jsObject is an ordinary JavaScript object's own data properties: in
// insertion order, enumerated as OrdinaryOwnPropertyKeys says.
type jsObject struct {
	names []string // insertion order; a name is string(units) via unitsKey
	vals  map[string]any
}

func newJSObject() *jsObject { return &jsObject{vals: map[string]any{}} }

// define is CreateDataProperty: a new name is appended, an existing one
// keeps its place and takes the new value.
func (o *jsObject) define(name string, v any) {
	if _, ok := o.vals[name]; !ok {
		o.names = append(o.names, name)
	}
	o.vals[name] = v
}

// ownKeys: array indices ascending, then the other names by insertion.
func (o *jsObject) ownKeys() []string {
	var idx, rest []string
	for _, n := range o.names {
		if _, ok := isArrayIndexName(n); ok {
			idx = append(idx, n)
		} else {
			rest = append(rest, n)
		}
	}
	slices.SortFunc(idx, func(a, b string) int {
		x, _ := isArrayIndexName(a)
		y, _ := isArrayIndexName(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return append(idx, rest...)
}

// Names are kept as Go strings holding the UTF-16 units, two bytes each,
// big-endian, so that Go's string order is code unit order.
func unitsKey(u []uint16) string {
	var sb strings.Builder
	for _, c := range u {
		sb.WriteByte(byte(c >> 8))
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

func keyUnits(k string) []uint16 {
	u := make([]uint16, len(k)/2)
	for i := range u {
		u[i] = uint16(k[2*i])<<8 | uint16(k[2*i+1])
	}
	return u
}

// isArrayIndexName: ToString(ToUint32(P)) is P and ToUint32(P) is not
// 2^32 - 1.
func isArrayIndexName(k string) (uint64, bool) {
	u := keyUnits(k)
	ascii := make([]byte, len(u))
	for i, c := range u {
		if c > 0x7F {
			return 0, false
		}
		ascii[i] = byte(c)
	}
	v, err := strconv.ParseUint(string(ascii), 10, 32)
	if err != nil || strconv.FormatUint(v, 10) != string(ascii) || v == math.MaxUint32 {
		return 0, false
	}
	return v, true
}

// jsReader is JSON.parse over UTF-16 code units. Values: nil, bool,
// float64, []uint16, []any, *jsObject.
type jsReader struct {
	s []uint16
	i int
}

func (r *jsReader) ws() {
	for r.i < len(r.s) && (r.s[r.i] == ' ' || r.s[r.i] == '\t' || r.s[r.i] == '\n' || r.s[r.i] == '\r') {
		r.i++
	}
}

func (r *jsReader) peek() int {
	if r.i >= len(r.s) {
		return -1
	}
	return int(r.s[r.i])
}

func (r *jsReader) value(depth int) (any, error) {
	if depth >= MaxDepth && (r.peek() == '[' || r.peek() == '{') {
		return nil, errRefUnrepresentable
	}
	switch c := r.peek(); {
	case c == '{':
		r.i++
		o := newJSObject()
		r.ws()
		if r.peek() == '}' {
			r.i++
			return o, nil
		}
		for {
			r.ws()
			if r.peek() != '"' {
				return nil, errRefSyntax
			}
			k, err := r.str()
			if err != nil {
				return nil, err
			}
			r.ws()
			if r.peek() != ':' {
				return nil, errRefSyntax
			}
			r.i++
			r.ws()
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			o.define(unitsKey(k), v)
			r.ws()
			switch r.peek() {
			case ',':
				r.i++
			case '}':
				r.i++
				return o, nil
			default:
				return nil, errRefSyntax
			}
		}
	case c == '[':
		r.i++
		a := []any{}
		r.ws()
		if r.peek() == ']' {
			r.i++
			return a, nil
		}
		for {
			r.ws()
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			r.ws()
			switch r.peek() {
			case ',':
				r.i++
			case ']':
				r.i++
				return a, nil
			default:
				return nil, errRefSyntax
			}
		}
	case c == '"':
		return r.str()
	case c == 't', c == 'f', c == 'n':
		for _, lit := range []struct {
			s string
			v any
		}{{"true", true}, {"false", false}, {"null", nil}} {
			if r.i+len(lit.s) <= len(r.s) && string(utf16.Decode(r.s[r.i:r.i+len(lit.s)])) == lit.s {
				r.i += len(lit.s)
				return lit.v, nil
			}
		}
		return nil, errRefSyntax
	case c == '-' || (c >= '0' && c <= '9'):
		return r.num()
	}
	return nil, errRefSyntax
}

func (r *jsReader) str() ([]uint16, error) {
	r.i++
	s := []uint16{}
	for {
		c := r.peek()
		switch {
		case c < 0:
			return nil, errRefSyntax
		case c == '"':
			r.i++
			return s, nil
		case c < 0x20:
			return nil, errRefSyntax
		case c != '\\':
			s = append(s, uint16(c))
			r.i++
			continue
		}
		r.i++
		e := r.peek()
		r.i++
		switch e {
		case '"', '\\', '/':
			s = append(s, uint16(e))
		case 'b':
			s = append(s, 8)
		case 'f':
			s = append(s, 12)
		case 'n':
			s = append(s, 10)
		case 'r':
			s = append(s, 13)
		case 't':
			s = append(s, 9)
		case 'u':
			if r.i+4 > len(r.s) {
				return nil, errRefSyntax
			}
			var h strings.Builder
			for _, d := range r.s[r.i : r.i+4] {
				if d > 0x7F || !strings.ContainsRune("0123456789abcdefABCDEF", rune(d)) {
					return nil, errRefSyntax
				}
				h.WriteByte(byte(d))
			}
			v, _ := strconv.ParseUint(h.String(), 16, 16)
			s = append(s, uint16(v))
			r.i += 4
		default:
			return nil, errRefSyntax
		}
	}
}

// num reads the number grammar with a regular-expression-like scan, then
// leaves the conversion to strconv.
func (r *jsReader) num() (any, error) {
	start := r.i
	isDigit := func() bool { c := r.peek(); return c >= '0' && c <= '9' }
	if r.peek() == '-' {
		r.i++
	}
	switch {
	case r.peek() == '0':
		r.i++
	case isDigit():
		for isDigit() {
			r.i++
		}
	default:
		return nil, errRefSyntax
	}
	if r.peek() == '.' {
		r.i++
		if !isDigit() {
			return nil, errRefSyntax
		}
		for isDigit() {
			r.i++
		}
	}
	if r.peek() == 'e' || r.peek() == 'E' {
		r.i++
		if r.peek() == '+' || r.peek() == '-' {
			r.i++
		}
		if !isDigit() {
			return nil, errRefSyntax
		}
		for isDigit() {
			r.i++
		}
	}
	f, _ := strconv.ParseFloat(string(utf16.Decode(r.s[start:r.i])), 64)
	return f, nil
}

// jsNormalise is the platform's normalise: objects rebuilt with sorted
// keys, assignment semantics (so "__proto__" sets a prototype instead of
// a property), Infinity refused (as a panic recovered by
// refCanonical).
func jsNormalise(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsInf(x, 0) {
			panic(errRefUnrepresentable)
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsNormalise(e)
		}
		return out
	case *jsObject:
		keys := x.ownKeys()
		// Array.prototype.sort's default comparator: UTF-16 code units,
		// which is Go's order on unitsKey strings.
		slices.Sort(keys)
		out := newJSObject()
		for _, k := range keys {
			v := jsNormalise(x.vals[k])
			if k == unitsKey(utf16.Encode([]rune("__proto__"))) {
				continue // [[Set]] of __proto__ changes the prototype
			}
			out.define(k, v)
		}
		return out
	}
	return v
}

// jsStringify is JSON.stringify (well-formed: lone surrogates escaped).
func jsStringify(out []uint16, v any) []uint16 {
	lit := func(s string) []uint16 { return append(out, utf16.Encode([]rune(s))...) }
	switch x := v.(type) {
	case nil:
		return lit("null")
	case bool:
		return lit(strconv.FormatBool(x))
	case float64:
		return lit(refNumber(x))
	case []uint16:
		return jsQuote(out, x)
	case []any:
		out = append(out, '[')
		for i, e := range x {
			if i > 0 {
				out = append(out, ',')
			}
			out = jsStringify(out, e)
		}
		return append(out, ']')
	case *jsObject:
		out = append(out, '{')
		for i, k := range x.ownKeys() {
			if i > 0 {
				out = append(out, ',')
			}
			out = jsQuote(out, keyUnits(k))
			out = append(out, ':')
			out = jsStringify(out, x.vals[k])
		}
		return append(out, '}')
	}
	panic("unreachable")
}

func jsQuote(out []uint16, s []uint16) []uint16 {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c < 0x20:
			out = append(out, utf16.Encode([]rune(fmt.Sprintf("\\u%04x", c)))...)
		case c >= 0xD800 && c <= 0xDBFF && i+1 < len(s) && s[i+1] >= 0xDC00 && s[i+1] <= 0xDFFF:
			out = append(out, c, s[i+1])
			i++
		case c >= 0xD800 && c <= 0xDFFF:
			out = append(out, utf16.Encode([]rune("\\u"+strconv.FormatUint(uint64(c), 16)))...)
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}

// refNumber: 'f' formatting inside JavaScript's positional range, Go's
// 'g' outside it with the exponent rewritten (e-07 → e-7).
func refNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}

// refCanonical is the reference canonical text, the platform's refusals
// turned into errors.
func refCanonical(body []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok && errors.Is(e, errRefUnrepresentable) {
				out, err = nil, errRefUnrepresentable
				return
			}
			panic(r)
		}
	}()
	return refCanonicalOrPanic(body)
}
