package replica

import (
	"fmt"
	"strings"

	"github.com/objectstack-fleet/reconciler/registry"
)

// keyParts are the parts of an entry's key.
type keyParts struct {
	Org     string
	Type    string
	Name    string
	Package string
	Secret  bool // a sys_secret credential: Name is its id
}

// secretPrefix starts the key of a credential read from sys_secret.
const secretPrefix = "sys_secret:"

// parseKey splits a key of kind k: credential <ref> or sys_secret:<id>;
// connector and datasource [org:]name[@package]; engine
// [org:]type/name[@package]; every segment percent-encoded.
func parseKey(k registry.Kind, key string) (keyParts, error) {
	var p keyParts
	var err error
	if k == registry.KindCredential {
		if rest, ok := strings.CutPrefix(key, secretPrefix); ok {
			p.Secret = true
			p.Name, err = unescape(rest)
		} else {
			p.Name, err = unescape(key)
		}
		if err != nil {
			return keyParts{}, fmt.Errorf("parse %s key %q: %w", k, key, err)
		}
		return p, nil
	}
	rest := key
	var org, pkg, typ string
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		org, rest = rest[:i], rest[i+1:]
	}
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		rest, pkg = rest[:i], rest[i+1:]
	}
	if k == registry.KindEngine {
		var ok bool
		if typ, rest, ok = strings.Cut(rest, "/"); !ok {
			return keyParts{}, fmt.Errorf("parse %s key %q: no type/name", k, key)
		}
	}
	for _, f := range []struct {
		dst *string
		src string
	}{{&p.Org, org}, {&p.Type, typ}, {&p.Name, rest}, {&p.Package, pkg}} {
		if *f.dst, err = unescape(f.src); err != nil {
			return keyParts{}, fmt.Errorf("parse %s key %q: %w", k, key, err)
		}
	}
	return p, nil
}

func unescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape at %d", i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad escape at %d", i)
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
