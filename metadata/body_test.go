package metadata_test

import (
	"errors"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/metadata"
)

func TestBodyFaultsNameTheMember(t *testing.T) {
	t.Parallel()
	root, err := metadata.ReadBody([]byte(`{"providerConfig":{"timeout":"soon","retries":7,"ok":true},"name":"","extra":1}`), "body")
	if err != nil {
		t.Fatal(err)
	}
	pc, ok, err := root.Object("providerConfig")
	if err != nil || !ok {
		t.Fatalf("Object: %v %v", ok, err)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"bad duration", second(pc.Duration("timeout")), `providerConfig.timeout must be a positive duration like "5s"`},
		{"int out of range", second(pc.Int("retries", 0, 5)), "providerConfig.retries must be between 0 and 5"},
		{"bool as string", second(pc.String("ok")), "providerConfig.ok must be a string"},
		{"empty string", second(root.String("name")), "name must not be empty"},
		{"required", func() error { _, err := root.Required("missing"); return err }(), "missing is required"},
		{"unknown member", root.Only("providerConfig", "name"), "extra is not a known setting"},
	}
	for _, c := range cases {
		if c.err == nil || c.err.Error() != c.want || !errors.Is(c.err, metadata.ErrInvalid) {
			t.Errorf("%s: %v, want %q wrapping ErrInvalid", c.name, c.err, c.want)
		}
	}
	if d, ok, err := mustDecode(t, `{"t":"5s"}`).Duration("t"); err != nil || !ok || d != 5*time.Second {
		t.Errorf("Duration: %v %v %v", d, ok, err)
	}
	for _, in := range []string{``, `[]`, `"x"`, `{"a":`} {
		if _, err := metadata.ReadBody([]byte(in), "config"); err == nil || !errors.Is(err, metadata.ErrInvalid) {
			t.Errorf("ReadBody(%q): %v", in, err)
		}
	}
	if mustDecode(t, `{"a":null}`).Has("a") {
		t.Error("null counts as present")
	}
}

func second[T any, U any](_ T, _ U, err error) error { return err }

func mustDecode(t *testing.T, s string) metadata.Body {
	t.Helper()
	o, err := metadata.ReadBody([]byte(s), "x")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestBodyReadsAsEncodingJSON: the values the readers accept and refuse
// are encoding/json's (the drivers read their bodies with it before).
func TestBodyReadsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	b := mustDecode(t, `{"n":1.5,"s":"5","e":1e2,"z":-0,"big":99999999999999999999,"t":"true","k":"first","k":"last","\u006bx":"esc","o":[]}`)
	for _, key := range []string{"n", "s", "e", "big", "t"} {
		if _, _, err := b.Int(key, -10, 10); err == nil || err.Error() != key+" must be an integer" {
			t.Errorf("Int(%s): %v", key, err)
		}
	}
	if n, ok, err := b.Int("z", -1, 1); n != 0 || !ok || err != nil {
		t.Errorf("Int(z): %v %v %v", n, ok, err)
	}
	if _, _, err := b.Bool("t"); err == nil || err.Error() != "t must be true or false" {
		t.Errorf("Bool(t): %v", err)
	}
	if s, _, _ := b.String("k"); s != "last" {
		t.Errorf("a repeated key reads %q, want the last value", s)
	}
	if s, _, _ := b.String("kx"); s != "esc" {
		t.Errorf("an escaped name reads %q", s)
	}
	if _, _, err := b.Object("o"); err == nil || err.Error() != "o must be a JSON object" {
		t.Errorf("Object(o): %v", err)
	}
	if err := b.Only("n", "s", "e", "z", "big", "t", "k", "kx"); err == nil || err.Error() != "o is not a known setting" {
		t.Errorf("Only: %v", err)
	}
	if _, err := metadata.ReadBody([]byte(`{"a":1,}`), "body"); err == nil ||
		err.Error() != "body is not valid JSON: invalid character '}' looking for beginning of object key string" {
		t.Errorf("invalid JSON: %v", err)
	}
}

// TestBodyConnectorIsParses: Body.Connector applies Parse's connector rule.
func TestBodyConnectorIsParses(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{}`, `{"enabled":false}`, `{"auth":{"type":"none"}}`,
		`{"auth":{"type":"api-key","credentialRef":"k"}}`,
		`{"auth":{"type":"bearer"}}`, `{"auth":{"type":"oauth"}}`, `{"auth":"x"}`, `{"enabled":"no"}`,
	} {
		it, perr := metadata.Parse("connector", "c", []byte(body), metadata.Limits{})
		c, cerr := mustDecode(t, body).Connector()
		switch {
		case perr != nil || cerr != nil:
			if perr == nil || cerr == nil || perr.Error() != cerr.Error() {
				t.Errorf("%s: Parse %v, Connector %v", body, perr, cerr)
			}
		case *it.Connector != *c:
			t.Errorf("%s: Parse %+v, Connector %+v", body, *it.Connector, *c)
		}
	}
}

func TestFaultOfIsBoth(t *testing.T) {
	t.Parallel()
	cause := errors.New("outside the origin")
	err := metadata.FaultOf(cause, "probe.path", "%s is outside", "https://x")
	var f *metadata.Fault
	if !errors.Is(err, metadata.ErrInvalid) || !errors.Is(err, cause) || !errors.As(err, &f) ||
		f.Path != "probe.path" || err.Error() != "probe.path https://x is outside" {
		t.Fatalf("FaultOf: %v", err)
	}
}
