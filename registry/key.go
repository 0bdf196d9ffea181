package registry

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Keys are unambiguous: every segment is percent-encoded (%, :, /, @,
// control characters and bytes that are not UTF-8), so two different rows
// never share a key and a key always parses back into its parts.
//
//	credential  <ref>                      a sys_connector_credential row
//	            sys_secret:<id>            a sys_secret row
//	connector   [org:]name[@package]
//	datasource  [org:]name[@package]
//	engine      [org:]type/name[@package]  object/account, org_1:view/all, object/account@crm
//
// The org part is present when the row's organization_id is neither NULL
// nor empty; the package part likewise.

// SecretPrefix starts the key of a credential entry read from sys_secret.
// Its colon is literal; a credential ref's colon is always encoded, so a
// sys_connector_credential ref can never read as a sys_secret key.
const SecretPrefix = "sys_secret:"

// KeyParts are the parts a key is made of. Type is set for engine entries
// only; Secret marks a sys_secret credential (Name is then its id).
type KeyParts struct {
	Org     string `json:"org"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	Package string `json:"package"`
	Secret  bool   `json:"-"`
}

// EngineKey is the key of an engine entry.
func EngineKey(org, typ, name, pkg string) string {
	return scoped(org, Escape(typ)+"/"+Escape(name), pkg)
}

// NamedKey is the key of a connector or datasource entry.
func NamedKey(org, name, pkg string) string { return scoped(org, Escape(name), pkg) }

// CredentialKey is the key of the credential entry of a
// sys_connector_credential ref.
func CredentialKey(ref string) string { return Escape(ref) }

// SecretKey is the key of the credential entry of a sys_secret row.
func SecretKey(id string) string { return SecretPrefix + Escape(id) }

func scoped(org, body, pkg string) string {
	if org == "" && pkg == "" {
		return body // most keys: no copy
	}
	n := len(body)
	if org != "" {
		n += len(org) + 1
	}
	if pkg != "" {
		n += len(pkg) + 1
	}
	var b strings.Builder
	b.Grow(n)
	if org != "" {
		b.WriteString(Escape(org))
		b.WriteByte(':')
	}
	b.WriteString(body)
	if pkg != "" {
		b.WriteByte('@')
		b.WriteString(Escape(pkg))
	}
	return b.String()
}

// ParseKey splits a key of kind k into its parts.
func ParseKey(k Kind, key string) (KeyParts, error) {
	var p KeyParts
	if k == KindCredential {
		var err error
		if rest, ok := strings.CutPrefix(key, SecretPrefix); ok {
			p.Secret = true
			p.Name, err = Unescape(rest)
		} else {
			p.Name, err = Unescape(key)
		}
		if err != nil {
			return KeyParts{}, fmt.Errorf("parse %s key %q: %w", k, key, err)
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
	if k == KindEngine {
		var ok bool
		typ, rest, ok = strings.Cut(rest, "/")
		if !ok {
			return KeyParts{}, fmt.Errorf("parse %s key %q: no type/name", k, key)
		}
	}
	var errs [4]error // one statement per part: a loop over pointers would allocate per key
	p.Org, errs[0] = Unescape(org)
	p.Type, errs[1] = Unescape(typ)
	p.Name, errs[2] = Unescape(rest)
	p.Package, errs[3] = Unescape(pkg)
	for _, err := range errs {
		if err != nil {
			return KeyParts{}, fmt.Errorf("parse %s key %q: %w", k, key, err)
		}
	}
	return p, nil
}

// Escape percent-encodes one key segment: %, :, /, @, ASCII and C1 control
// characters and every byte that is not part of valid UTF-8. Other
// characters are kept, so ordinary names read as they are.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f || c == '%' || c == ':' || c == '/' || c == '@' {
				pct(&b, c)
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (r >= 0x80 && r <= 0x9f) {
			for j := 0; j < size; j++ {
				pct(&b, s[i+j])
			}
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f || c == '%' || c == ':' || c == '/' || c == '@' {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (r >= 0x80 && r <= 0x9f) {
			return true
		}
		i += size
	}
	return false
}

func pct(b *strings.Builder, c byte) {
	const hex = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&15])
}

// Unescape reverses Escape.
func Unescape(s string) (string, error) {
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
