package metadata

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// Body is a JSON object read member by member, for the drivers that build
// connectors and datasources from their bodies: each reader names the
// member at fault in a *Fault ("providerConfig.timeout must be a positive
// duration like \"5s\""), with the same scanner Parse uses. A member path
// joins names with dots, as the drivers' messages spell them.
type Body struct {
	o    obj
	path string // where the object sits ("" for the body itself)
}

// ReadBody reads b, which must be one valid JSON object; what names it in
// faults ("body", "datasource record").
func ReadBody(b []byte, what string) (Body, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return Body{}, faultf("", "%s must be a JSON object", what)
	}
	if !json.Valid(t) {
		var v any
		err := json.Unmarshal(t, &v) // only to say where
		return Body{}, faultf("", "%s is not valid JSON: %v", what, err)
	}
	a := &arena{}
	return Body{o: obj{src: t, es: a.members(t, 0), a: a}}, nil
}

// Faultf returns a *Fault naming the member at path ("" for none): its
// message is path, a space, and the formatted text.
func Faultf(path, format string, args ...any) error { return faultf(path, format, args...) }

// FaultOf is Faultf for a fault that is also cause (errors.Is), a driver's
// sentinel such as a connector URL outside its baseUrl's origin.
func FaultOf(cause error, path, format string, args ...any) error {
	f := faultf(path, format, args...)
	f.kind = cause
	return f
}

// Path returns the path of member key.
func (b Body) Path(key string) string {
	if b.path == "" {
		return key
	}
	return b.path + "." + key
}

// Has reports whether key is present and not null.
func (b Body) Has(key string) bool { return b.o.has(key) }

// String reads key as a non-empty string; ok is false when absent or null.
func (b Body) String(key string) (s string, ok bool, err error) {
	raw, ok := b.o.get(key)
	if !ok || raw[0] == 'n' {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", false, faultf(b.Path(key), "must be a string")
	}
	if s = unquote(raw); s == "" {
		return "", false, faultf(b.Path(key), "must not be empty")
	}
	return s, true, nil
}

// Required reads key as a non-empty string that must be present.
func (b Body) Required(key string) (string, error) {
	s, ok, err := b.String(key)
	if err == nil && !ok {
		err = faultf(b.Path(key), "is required")
	}
	return s, err
}

// Bool reads key as a boolean.
func (b Body) Bool(key string) (v bool, ok bool, err error) {
	raw, ok := b.o.get(key)
	switch {
	case !ok || raw[0] == 'n':
		return false, false, nil
	case raw[0] == 't':
		return true, true, nil
	case raw[0] == 'f':
		return false, true, nil
	}
	return false, false, faultf(b.Path(key), "must be true or false")
}

// Int reads key as an integer in [lo, hi].
func (b Body) Int(key string, lo, hi int64) (n int64, ok bool, err error) {
	raw, ok := b.o.get(key)
	if !ok || raw[0] == 'n' {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(string(raw), 10, 64)
	if perr != nil {
		return 0, false, faultf(b.Path(key), "must be an integer")
	}
	if n < lo || n > hi {
		return 0, false, faultf(b.Path(key), "must be between %d and %d", lo, hi)
	}
	return n, true, nil
}

// Duration reads key as a positive duration string ("5s", "30m").
func (b Body) Duration(key string) (d time.Duration, ok bool, err error) {
	s, ok, err := b.String(key)
	if err != nil || !ok {
		if err != nil {
			err = faultf(b.Path(key), "must be a duration like \"5s\"")
		}
		return 0, false, err
	}
	d, perr := time.ParseDuration(s)
	if perr != nil || d <= 0 {
		return 0, false, faultf(b.Path(key), "must be a positive duration like \"5s\"")
	}
	return d, true, nil
}

// Object reads key as a nested object; absent or null, it is an empty
// one (ok false) that still knows its path.
func (b Body) Object(key string) (Body, bool, error) {
	n := Body{path: b.Path(key)}
	e := b.o.find(key)
	if e == nil {
		return n, false, nil
	}
	switch v := e.value(b.o.src); v[0] {
	case 'n':
		return n, false, nil
	case '{':
		n.o = obj{src: b.o.src, base: b.o.path(), key: e, es: b.o.membersOf(e), a: b.o.a}
		return n, true, nil
	}
	return Body{}, false, faultf(n.path, "must be a JSON object")
}

// Only returns a fault naming the first member (in sorted order) that is
// not one of known.
func (b Body) Only(known ...string) error {
	keys := make([]string, 0, len(b.o.es))
	for i := range b.o.es {
		keys = append(keys, b.o.es[i].key(b.o.src))
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return faultf(b.Path(k), "is not a known setting")
		}
	}
	return nil
}

// Connector applies the connector rule Parse applies (which credential the
// auth type uses) to b, a connector body read by ReadBody.
func (b Body) Connector() (*Connector, error) { return connectorOf(&b.o) }
