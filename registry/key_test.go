package registry

import (
	"testing"
	"unicode/utf8"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		key  string
		want KeyParts
	}{
		{KindEngine, EngineKey("", "object", "account", ""), KeyParts{Type: "object", Name: "account"}},
		{KindEngine, EngineKey("org_1", "view", "all_accounts", ""), KeyParts{Org: "org_1", Type: "view", Name: "all_accounts"}},
		{KindEngine, EngineKey("", "object", "account", "crm"), KeyParts{Type: "object", Name: "account", Package: "crm"}},
		{KindEngine, EngineKey("a:b", "x/y", "n@m%", "p@q"), KeyParts{Org: "a:b", Type: "x/y", Name: "n@m%", Package: "p@q"}},
		{KindConnector, NamedKey("acme", "crm", ""), KeyParts{Org: "acme", Name: "crm"}},
		{KindConnector, NamedKey("", "acme:crm", ""), KeyParts{Name: "acme:crm"}},
		{KindDatasource, NamedKey("", "wh\x1b[31m", "pkg"), KeyParts{Name: "wh\x1b[31m", Package: "pkg"}},
		{KindCredential, CredentialKey("crm-token"), KeyParts{Name: "crm-token"}},
		{KindCredential, CredentialKey("sys_secret:abc"), KeyParts{Name: "sys_secret:abc"}},
		{KindCredential, SecretKey("sec_01"), KeyParts{Name: "sec_01", Secret: true}},
		{KindCredential, CredentialKey("bad\xff\xfe"), KeyParts{Name: "bad\xff\xfe"}},
	} {
		got, err := ParseKey(tc.kind, tc.key)
		if err != nil || got != tc.want {
			t.Errorf("ParseKey(%s, %q) = %+v, %v; want %+v", tc.kind, tc.key, got, err, tc.want)
		}
		if !utf8.ValidString(tc.key) {
			t.Errorf("key %q is not valid UTF-8", tc.key)
		}
		for _, c := range []byte(tc.key) {
			if c < 0x20 || c == 0x7f {
				t.Errorf("key %q holds a control character", tc.key)
			}
		}
	}
	// The collisions of the old format are gone.
	if NamedKey("", "acme:crm", "") == NamedKey("acme", "crm", "") {
		t.Fatal("an org-less acme:crm shares a key with org acme's crm")
	}
	if CredentialKey("sys_secret:abc") == SecretKey("abc") {
		t.Fatal("a credential ref reads as a sys_secret key")
	}
	if EngineKey("", "object", "a", "p") == EngineKey("", "object", "a@p", "") {
		t.Fatal("package and name collide")
	}
}

func FuzzKeyRoundTrip(f *testing.F) {
	f.Add("org", "object", "account", "pkg")
	f.Add("a:b", "x/y", "%41", "@")
	f.Fuzz(func(t *testing.T, org, typ, name, pkg string) {
		if typ == "" {
			return
		}
		got, err := ParseKey(KindEngine, EngineKey(org, typ, name, pkg))
		if err != nil {
			t.Fatal(err)
		}
		if got != (KeyParts{Org: org, Type: typ, Name: name, Package: pkg}) {
			t.Fatalf("round trip of %q %q %q %q gave %+v", org, typ, name, pkg, got)
		}
		got, err = ParseKey(KindConnector, NamedKey(org, name, pkg))
		if err != nil || got != (KeyParts{Org: org, Name: name, Package: pkg}) {
			t.Fatalf("named round trip: %+v %v", got, err)
		}
	})
}
