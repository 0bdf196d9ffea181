package metadata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
)

// The body is validated once (json.Valid); everything below walks the
// validated bytes with a small scanner, so that parsing costs one pass per
// level the rules descend into, with no decoding of members they skip.

// obj is a JSON object whose members are still raw, with the path it sits
// at in the body ("" for the body itself): base, or member key of base
// when keyed (built only when a fault names it).
type obj struct {
	base  string
	key   entry // the member o is the value of, when keyed
	keyed bool
	es    []entry // in body order; a repeated key appears each time
	a     *arena  // where the members of objects below are listed
}

// path is where o sits in the body.
func (o obj) path() string {
	if o.keyed {
		return member(o.base, o.key.key())
	}
	return o.base
}

// entry is one member of a JSON object. Its name is decoded only when
// asked for: most are only compared, and a name compared costs nothing.
type entry struct {
	raw []byte // the name between its quotes, as written
	esc bool   // raw has an escape or is not UTF-8: compare it decoded
	val []byte
}

// key returns the member's name.
func (e entry) key() string {
	if !e.esc {
		if k, ok := knownKey(e.raw); ok {
			return k
		}
		return string(e.raw)
	}
	return decode(e.raw)
}

// is reports whether the member is named s.
func (e entry) is(s string) bool {
	if !e.esc {
		return string(e.raw) == s // compared in place: no allocation
	}
	return decode(e.raw) == s
}

// sameKey reports whether e and f have the same name.
func (e entry) sameKey(f entry) bool {
	if !e.esc && !f.esc {
		return bytes.Equal(e.raw, f.raw)
	}
	return e.key() == f.key()
}

// kindOf names the JSON kind of a raw value for messages.
func kindOf(raw []byte) string {
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// decodeBody reads the body, which must be one JSON object; with validate
// it is checked to be valid JSON first.
func decodeBody(body []byte, a *arena, validate bool) (obj, error) {
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' {
		return obj{}, faultf("", "metadata is not a JSON object")
	}
	if validate && !json.Valid(t) {
		var v any
		err := json.Unmarshal(t, &v) // only to say where
		return obj{}, faultf("", "metadata is not valid JSON: %s", jsonError(err))
	}
	return obj{es: a.members(t), a: a}, nil
}

func jsonError(err error) string {
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err == nil {
		return "invalid"
	}
	return err.Error()
}

// asObject reads raw (valid JSON, a member of o) as the object at path.
func (o obj) asObject(raw []byte, path string) (obj, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return obj{}, faultf(path, "must be a JSON object, not %s", kindOf(raw))
	}
	return obj{base: path, es: o.a.members(raw), a: o.a}, nil
}

// asMember reads the value of e (a member of an object at base) as the
// object at member e of base.
func (o obj) asMember(e entry, base string) (obj, error) {
	if len(e.val) == 0 || e.val[0] != '{' {
		return obj{}, faultf(member(base, e.key()), "must be a JSON object, not %s", kindOf(e.val))
	}
	return obj{base: base, key: e, keyed: true, es: o.a.members(e.val), a: o.a}, nil
}

// get returns the value of key (the last one if it repeats).
func (o obj) get(key string) ([]byte, bool) {
	for i := len(o.es) - 1; i >= 0; i-- {
		if o.es[i].is(key) {
			return o.es[i].val, true
		}
	}
	return nil, false
}

// has reports whether key is present and not null.
func (o obj) has(key string) bool {
	raw, ok := o.get(key)
	return ok && raw[0] != 'n'
}

func (o obj) at(key string) string { return member(o.path(), key) }

// str reads key as a string; ok is false when it is absent or null.
func (o obj) str(key string) (s string, ok bool, err error) {
	raw, ok := o.get(key)
	if !ok || raw[0] == 'n' {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", false, faultf(o.at(key), "must be a string, not %s", kindOf(raw))
	}
	return unquote(raw), true, nil
}

// name reads key as an optional name: absent, null or blank give "".
func (o obj) name(key string) (string, error) {
	s, _, err := o.str(key)
	if err != nil || blank(s) {
		return "", err
	}
	return s, nil
}

// boolean reads key as a boolean, def when absent or null.
func (o obj) boolean(key string, def bool) (bool, error) {
	raw, ok := o.get(key)
	switch {
	case !ok || raw[0] == 'n':
		return def, nil
	case raw[0] == 't':
		return true, nil
	case raw[0] == 'f':
		return false, nil
	}
	return false, faultf(o.at(key), "must be true or false, not %s", kindOf(raw))
}

// object reads key as a nested object; ok is false when absent or null.
func (o obj) object(key string) (obj, bool, error) {
	raw, ok := o.get(key)
	if !ok || raw[0] == 'n' {
		return obj{}, false, nil
	}
	n, err := o.asObject(raw, o.at(key))
	return n, err == nil, err
}

// array reads key as an array of raw elements; nil when absent or null.
func (o obj) array(key string) ([][]byte, error) {
	raw, ok := o.get(key)
	if !ok || raw[0] == 'n' {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, faultf(o.at(key), "must be an array, not %s", kindOf(raw))
	}
	return elements(raw), nil
}

// mapOf reads key as an object used as a map (name → value) and returns
// its members in body order, nil when absent or null. A repeated key keeps
// its first position and its last value, as JavaScript's JSON.parse does.
func (o obj) mapOf(key string) ([]entry, error) {
	raw, ok := o.get(key)
	if !ok || raw[0] == 'n' {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, faultf(o.at(key), "must be a JSON object, not %s", kindOf(raw))
	}
	return dedupe(o.a.members(raw)), nil
}

// dedupe keeps each key once, at its first position with its last value.
func dedupe(es []entry) []entry {
	if len(es) < 2 {
		return es
	}
	if len(es) <= smallSet {
		for i := 1; i < len(es); i++ {
			for j := 0; j < i; j++ {
				if es[i].sameKey(es[j]) {
					return dedupeMap(es)
				}
			}
		}
		return es // no key repeats
	}
	// Many members: look for a repeat among the names in order (no
	// string per name), and build the map only if one repeats.
	names := make([][]byte, len(es))
	for i, e := range es {
		if e.esc {
			return dedupeMap(es)
		}
		names[i] = e.raw
	}
	slices.SortFunc(names, bytes.Compare)
	for i := 1; i < len(names); i++ {
		if bytes.Equal(names[i], names[i-1]) {
			return dedupeMap(es)
		}
	}
	return es
}

// smallSet is the size up to which comparing every pair beats a map.
const smallSet = 8

func dedupeMap(es []entry) []entry {
	pos := make(map[string]int, len(es))
	out := make([]entry, 0, len(es))
	for _, e := range es {
		k := e.key()
		if i, dup := pos[k]; dup {
			out[i].val = e.val
			continue
		}
		pos[k] = len(out)
		out = append(out, e)
	}
	return out
}

// knownKey returns the member names the rules read as constants, so that
// asking for them allocates nothing (the conversion in a switch does not).
func knownKey(b []byte) (string, bool) {
	switch string(b) {
	case "name":
		return "name", true
	case "type":
		return "type", true
	case "reference":
		return "reference", true
	case "object":
		return "object", true
	case "objectName":
		return "objectName", true
	case "config":
		return "config", true
	case "data":
		return "data", true
	case "provider":
		return "provider", true
	case "id":
		return "id", true
	case "label":
		return "label", true
	}
	return "", false
}

// arena holds the members listed during one Parse, in one slice reused
// from call to call (nil: each list is allocated).
type arena struct{ es []entry }

// arenas recycles arenas between Parse calls (on every core).
var arenas = sync.Pool{New: func() any { return &arena{es: make([]entry, 0, 64)} }}

// maxArena is the most entries an arena keeps for the next Parse.
const maxArena = 4096

func getArena() *arena { return arenas.Get().(*arena) }

// putArena recycles a: nothing may use the lists it holds any more.
func putArena(a *arena) {
	if cap(a.es) > maxArena {
		return
	}
	clear(a.es) // let go of the body
	a.es = a.es[:0]
	arenas.Put(a)
}

// members lists the members of the object b, which must be valid JSON
// starting with '{'. The list is a's until a is recycled.
func (a *arena) members(b []byte) []entry {
	if a == nil {
		return members(b, make([]entry, 0, 4))
	}
	start := len(a.es)
	a.es = members(b, a.es)
	return a.es[start:len(a.es):len(a.es)]
}

// members appends the members of the object b to es.
func members(b []byte, es []entry) []entry {
	i := skipWS(b, 1)
	for i < len(b) && b[i] != '}' {
		kEnd := stringEnd(b, i)
		raw := b[i+1 : kEnd-1]
		esc := !plainASCII(raw)
		i = skipWS(b, kEnd) + 1 // ':'
		i = skipWS(b, i)
		vEnd := valueEnd(b, i)
		es = append(es, entry{raw: raw, esc: esc, val: b[i:vEnd]})
		i = skipWS(b, vEnd)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return es
}

// elements lists the elements of the array b, which must be valid JSON
// starting with '['.
func elements(b []byte) [][]byte {
	var out [][]byte
	i := skipWS(b, 1)
	for i < len(b) && b[i] != ']' {
		end := valueEnd(b, i)
		out = append(out, b[i:end])
		i = skipWS(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return out
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index after the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// plainASCII reports whether a member name is printable ASCII without
// escapes: compared as written (anything else is decoded to compare).
func plainASCII(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// valueEnd returns the index after the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// unquote decodes the JSON string q (valid, quotes included) as
// encoding/json does: invalid UTF-8 becomes U+FFFD.
func unquote(q []byte) string {
	in := q[1 : len(q)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	var s string
	_ = json.Unmarshal(q, &s) // q is valid JSON
	return s
}

// decode is unquote for a string's contents (quotes excluded).
func decode(in []byte) string {
	q := make([]byte, 0, len(in)+2)
	q = append(append(append(q, '"'), in...), '"')
	return unquote(q)
}
