package canonjson

import "testing"

func TestCanonical(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"b":1, "a":[true,null,"x<y"]}`, `{"a":[true,null,"x<y"],"b":1}`},
		{` {"z":{"d":1.50,"c":"é"}} `, `{"z":{"c":"é","d":1.50}}`},
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
