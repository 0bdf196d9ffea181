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
// validated bytes with a small scanner, with no decoding of members the
// rules skip. Listing an object's members also lists those of the objects
// nested a few levels below it in the same pass (the rules descend into
// fields, then each field), so that a body's bytes are scanned about once
// rather than once per level.

// obj is a JSON object whose members are still raw, with the path it sits
// at in the body ("" for the body itself): base, or member key of base
// when key is set (built only when a fault names it).
type obj struct {
	src  []byte // the bytes o was listed from, which its entries index
	base string
	key  *entry  // the member o is the value of, if any (in src)
	es   []entry // in body order; a repeated key appears each time
	a    *arena  // where the members of objects below are listed
}

// path is where o sits in the body.
func (o *obj) path() string {
	if o.key != nil {
		return member(o.base, o.key.key(o.src))
	}
	return o.base
}

// entry is one member of a JSON object: where its name and value lie in
// the bytes its object was listed from. It holds no pointer, so that
// listing members and recycling the lists cost the collector nothing. Its
// name is decoded only when asked for: most are only compared, and a name
// compared costs nothing.
type entry struct {
	name span // between its quotes, as written
	val  span
	// kids are where the arena holds the members of val, when val is an
	// object listed in the same pass as e (listed).
	kids   span
	listed bool
	esc    bool // the name has an escape or is not UTF-8: compare it decoded
}

// span is src[start:end] of the bytes listed, or a list in an arena.
type span struct{ start, end int }

func (s span) of(src []byte) []byte { return src[s.start:s.end] }

// raw returns the member's name as written.
func (e *entry) raw(src []byte) []byte { return e.name.of(src) }

// value returns the member's value.
func (e *entry) value(src []byte) []byte { return e.val.of(src) }

// key returns the member's name.
func (e *entry) key(src []byte) string {
	raw := e.raw(src)
	if !e.esc {
		if k, ok := knownKey(raw); ok {
			return k
		}
		return string(raw)
	}
	return decode(raw)
}

// is reports whether the member is named s.
func (e *entry) is(src []byte, s string) bool {
	if !e.esc {
		// Compared in place (no allocation), and most names differ in
		// length from the one sought.
		return e.name.end-e.name.start == len(s) && string(e.raw(src)) == s
	}
	return decode(e.raw(src)) == s
}

// sameKey reports whether e and f have the same name.
func (e *entry) sameKey(f *entry, src []byte) bool {
	if !e.esc && !f.esc {
		return bytes.Equal(e.raw(src), f.raw(src))
	}
	return e.key(src) == f.key(src)
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
	return obj{src: t, es: a.members(t, 0), a: a}, nil
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

// asObject reads raw (valid JSON, an element of an array below o) as the
// object at path.
func (o *obj) asObject(raw []byte, path string) (obj, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return obj{}, faultf(path, "must be a JSON object, not %s", kindOf(raw))
	}
	return obj{src: raw, base: path, es: o.a.members(raw, 0), a: o.a}, nil
}

// asMember reads the value of e (a member of o or of an object below it,
// listed from o.src, at base) as the object at member e of base.
func (o *obj) asMember(e *entry, base string) (obj, error) {
	if v := e.value(o.src); len(v) == 0 || v[0] != '{' {
		return obj{}, faultf(member(base, e.key(o.src)), "must be a JSON object, not %s", kindOf(v))
	}
	return obj{src: o.src, base: base, key: e, es: o.membersOf(e), a: o.a}, nil
}

// membersOf returns the members of e's value, an object: listed with e's
// own if it was, else listed now.
func (o *obj) membersOf(e *entry) []entry {
	if e.listed {
		return o.a.at(e.kids)
	}
	return o.a.members(o.src, e.val.start)
}

// find returns the member key (the last one if it repeats), nil if absent.
func (o *obj) find(key string) *entry {
	for i := len(o.es) - 1; i >= 0; i-- {
		if o.es[i].is(o.src, key) {
			return &o.es[i]
		}
	}
	return nil
}

// get returns the value of key (the last one if it repeats).
func (o *obj) get(key string) ([]byte, bool) {
	if e := o.find(key); e != nil {
		return e.value(o.src), true
	}
	return nil, false
}

// has reports whether key is present and not null.
func (o *obj) has(key string) bool {
	raw, ok := o.get(key)
	return ok && raw[0] != 'n'
}

func (o *obj) at(key string) string { return member(o.path(), key) }

// str reads key as a string; ok is false when it is absent or null.
func (o *obj) str(key string) (s string, ok bool, err error) {
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
func (o *obj) name(key string) (string, error) {
	s, _, err := o.str(key)
	if err != nil || blank(s) {
		return "", err
	}
	return s, nil
}

// boolean reads key as a boolean, def when absent or null.
func (o *obj) boolean(key string, def bool) (bool, error) {
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
func (o *obj) object(key string) (obj, bool, error) {
	e := o.find(key)
	if e == nil {
		return obj{}, false, nil
	}
	v := e.value(o.src)
	if v[0] == 'n' {
		return obj{}, false, nil
	}
	if v[0] != '{' {
		return obj{}, false, faultf(o.at(key), "must be a JSON object, not %s", kindOf(v))
	}
	return obj{src: o.src, base: o.path(), key: e, es: o.membersOf(e), a: o.a}, true, nil
}

// array reads key as an array of raw elements; nil when absent or null.
func (o *obj) array(key string) ([][]byte, error) {
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
func (o *obj) mapOf(key string) ([]entry, error) {
	e := o.find(key)
	if e == nil {
		return nil, nil
	}
	v := e.value(o.src)
	if v[0] == 'n' {
		return nil, nil
	}
	if v[0] != '{' {
		return nil, faultf(o.at(key), "must be a JSON object, not %s", kindOf(v))
	}
	return dedupe(o.src, o.membersOf(e)), nil
}

// dedupe keeps each key of es (listed from src) once, at its first
// position with its last value.
func dedupe(src []byte, es []entry) []entry {
	if len(es) < 2 {
		return es
	}
	if len(es) <= smallSet {
		for i := 1; i < len(es); i++ {
			for j := 0; j < i; j++ {
				if es[i].sameKey(&es[j], src) {
					return dedupeMap(src, es)
				}
			}
		}
		return es // no key repeats
	}
	// Many members: look for a repeat among the names in order (no
	// string per name), and build the map only if one repeats.
	names := make([][]byte, len(es))
	for i := range es {
		if es[i].esc {
			return dedupeMap(src, es)
		}
		names[i] = es[i].raw(src)
	}
	slices.SortFunc(names, bytes.Compare)
	for i := 1; i < len(names); i++ {
		if bytes.Equal(names[i], names[i-1]) {
			return dedupeMap(src, es)
		}
	}
	return es
}

// smallSet is the size up to which comparing every pair beats a map.
const smallSet = 8

func dedupeMap(src []byte, es []entry) []entry {
	pos := make(map[string]int, len(es))
	out := make([]entry, 0, len(es))
	for _, e := range es {
		k := e.key(src)
		if i, dup := pos[k]; dup {
			// The last value, with its members, under the name as first
			// written.
			e.name, e.esc = out[i].name, out[i].esc
			out[i] = e
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

// listDepth is how many levels of objects below the one asked for members
// lists in the same pass: the rules read an object's fields, each field
// and its summaryOperations, or a view's listViews, each view and its data.
// Deeper objects are listed when asked for.
const listDepth = 3

// arena holds the members listed during one Parse, in slices reused from
// call to call. Entries hold no pointer: a recycled arena keeps no body
// alive and need not be cleared.
type arena struct {
	es []entry
	// open holds the members of the objects being listed, innermost last:
	// an object's list goes to es whole once it ends, so that each list is
	// one run of es although the lists nested in it end first.
	open []entry
}

// arenas recycles arenas between Parse calls (on every core).
var arenas = sync.Pool{New: func() any {
	return &arena{es: make([]entry, 0, 64), open: make([]entry, 0, 16)}
}}

// maxArena is the most entries an arena keeps for the next Parse.
const maxArena = 4096

func getArena() *arena { return arenas.Get().(*arena) }

// putArena recycles a: nothing may use the lists it holds any more.
func putArena(a *arena) {
	if cap(a.es) > maxArena || cap(a.open) > maxArena {
		return
	}
	a.es = a.es[:0] // open is empty once a list ends
	arenas.Put(a)
}

// members lists the members of the object starting at src[i] (valid JSON)
// and of the objects nested in it down to listDepth. The list indexes src
// and is a's until a is recycled.
func (a *arena) members(src []byte, i int) []entry {
	l, _ := a.list(src, i, listDepth)
	return a.at(l)
}

// at returns the list l of a (full: appending to it copies it).
func (a *arena) at(l span) []entry { return a.es[l.start:l.end:l.end] }

// list lists the members of the object starting at src[i] and, depth
// levels down, those of the objects among their values; it returns where
// the list is in a.es and the index after the object.
func (a *arena) list(src []byte, i, depth int) (span, int) {
	base := len(a.open)
	i = skipWS(src, i+1)
	for i < len(src) && src[i] != '}' {
		kEnd, plain := nameEnd(src, i)
		e := entry{name: span{i + 1, kEnd - 1}, esc: !plain}
		i = skipWS(src, kEnd) + 1 // ':'
		i = skipWS(src, i)
		if i >= len(src) {
			break // not valid JSON after all: list what there is
		}
		var end int
		if depth > 0 && src[i] == '{' {
			e.kids, end = a.list(src, i, depth-1)
			e.listed = true
		} else {
			end = valueEnd(src, i)
		}
		e.val = span{i, end}
		a.open = append(a.open, e)
		i = skipWS(src, end)
		if i < len(src) && src[i] == ',' {
			i = skipWS(src, i+1)
		}
	}
	start := len(a.es)
	a.es = append(a.es, a.open[base:]...)
	a.open = a.open[:base]
	return span{start, len(a.es)}, min(i+1, len(src))
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

// nameEnd is stringEnd for a member name, which it also reports to be
// plain: ASCII without escapes, compared as written (anything else is
// decoded to compare).
func nameEnd(b []byte, i int) (end int, plain bool) {
	plain = true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, plain
		case c == '\\':
			plain = false
			j++
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	return len(b), plain
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
