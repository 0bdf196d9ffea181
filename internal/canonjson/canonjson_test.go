package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
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

// canonicalReference is the first, decode-based implementation: decode into
// maps and slices, then print. Canonical must agree with it on valid JSON.
func canonicalReference(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := refWrite(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func refWrite(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case json.Number:
		writeNumber(buf, x)
	case string:
		writeString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := refWrite(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := refWrite(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("canonical json: unexpected %T", v)
	}
	return nil
}

// FuzzAgainstReference: on every valid document the one-pass canonicalizer
// prints exactly what the decode-based one prints, and it rejects exactly
// the invalid ones.
func FuzzAgainstReference(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2.50,{"z":null,"a":true}],"a":"\u0000é\ud83d\ude00\ud800x"}`,
		`{"a":1,"a":2,"b":{"d":1,"c":2}}`, `"\xff\xfe"`, `[1e400, -0.0, 1E+2, 0.1e-7]`,
		"\"a\xffb\xc3\"", `{"k\"ey":"\/\b\f\n\r\t"}`, ` [ ] `, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Canonical(in)
		if !json.Valid(in) {
			if err == nil {
				t.Fatalf("accepted invalid JSON %q", in)
			}
			return
		}
		want, rerr := canonicalReference(in)
		if rerr != nil {
			return // beyond encoding/json's limits (depth)
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q) = %q, %v; reference %q", in, got, err, want)
		}
	})
}

func BenchmarkCanonical(b *testing.B) {
	body := []byte(`{"label":"Account","fields":[{"name":"name","type":"text"},{"name":"amount","type":"currency","precision":2},{"name":"parent","type":"lookup","reference":"account"},{"name":"notes","type":"textarea","help":"Free text, \"quoted\" and ünïcode"}],"datasource":"crm","enableHistory":true}`)
	for _, c := range []struct {
		name string
		fn   func([]byte) ([]byte, error)
	}{{"one-pass", Canonical}, {"decode-reference", canonicalReference}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
