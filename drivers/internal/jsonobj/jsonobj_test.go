package jsonobj

import (
	"errors"
	"testing"
	"time"
)

func TestDecodeFaultsNameTheMember(t *testing.T) {
	t.Parallel()
	root, err := DecodeRoot([]byte(`{"providerConfig":{"timeout":"soon","retries":7,"ok":true},"name":"","extra":1}`), "body")
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
		if c.err == nil || c.err.Error() != c.want || !errors.Is(c.err, ErrBody) {
			t.Errorf("%s: %v, want %q wrapping ErrBody", c.name, c.err, c.want)
		}
	}
	if d, ok, err := mustDecode(t, `{"t":"5s"}`).Duration("t"); err != nil || !ok || d != 5*time.Second {
		t.Errorf("Duration: %v %v %v", d, ok, err)
	}
	for _, in := range []string{``, `[]`, `"x"`, `{"a":`} {
		if _, err := Decode([]byte(in), "config"); err == nil || !errors.Is(err, ErrBody) {
			t.Errorf("Decode(%q): %v", in, err)
		}
	}
	if mustDecode(t, `{"a":null}`).Has("a") {
		t.Error("null counts as present")
	}
}

func second[T any, U any](_ T, _ U, err error) error { return err }

func mustDecode(t *testing.T, s string) Object {
	t.Helper()
	o, err := Decode([]byte(s), "x")
	if err != nil {
		t.Fatal(err)
	}
	return o
}
