package canonjson

import (
	"encoding/json"
	"testing"
)

func TestCanonical(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"b":1, "a":[true,null,"x<y"]}`, `{"a":[true,null,"x<y"],"b":1}`},
		{` {"z":{"d":1.50,"c":"é"}} `, `{"z":{"c":"é","d":1.5}}`},
		{`[1e2, -0, 0.0000001, 1e21, 12345678901234567890123, "a\u0001\n\"\\\u2028/<"]`, `[100,0,1e-7,1e+21,1.2345678901234568e+22,"a\u0001\n\"\\ /<"]`},
		{`[]`, `[]`},
	}
	for _, c := range cases {
		got, err := Canonical([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := Canonical([]byte(`{"a":1} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
	a, _ := Checksum([]byte(`{"b":1,"a":2}`))
	b, _ := Checksum([]byte(`{"a":2, "b":1}`))
	if a != b || len(a) != len("sha256:")+64 {
		t.Errorf("checksums differ: %s %s", a, b)
	}
}

// FuzzCanonical: any input either fails cleanly or canonicalizes to a
// fixed point that is valid JSON.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.50,{"z":null}],"a":"\u0000é"}`, `1e400`, `"\xff"`, `[]`, `{"a":-0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Canonical(in)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("invalid output %q", c)
		}
		c2, err := Canonical(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", c, c2, err)
		}
	})
}
