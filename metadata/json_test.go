package metadata

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// The scanner reads any valid JSON object as encoding/json does: same
// members (last value of a repeated key), same values, same strings, and
// so for the objects it lists along with their parent's members.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[1,{"c":"}"}],"a":"x\"y"}`, ` { "k" : null , "\u00e9\\" : true } `,
		`{"a":{"b":{"c":[[],{}]}},"d":-1.5e3,"e":"\ud800","f":"` + "\xff" + `"}`,
		`{"a":{"x":{"y":1},"x":{"z":{"w":{"v":{}}}}}, "b" : { } }`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		t1 := bytes.TrimSpace(b)
		if !json.Valid(t1) || len(t1) == 0 || t1[0] != '{' {
			return
		}
		a := &arena{}
		sameMembers(t, a, t1, t1, a.members(t1, 0))
	})
}

// sameMembers checks es, the members of the object o listed from src,
// against encoding/json's reading of o, and the members listed with them.
func sameMembers(t *testing.T, a *arena, src, o []byte, es []entry) {
	t.Helper()
	var want map[string]json.RawMessage
	if err := json.Unmarshal(o, &want); err != nil {
		t.Fatal(err)
	}
	got := dedupe(src, es)
	if len(got) != len(want) {
		t.Fatalf("%s: %d members, want %d", o, len(got), len(want))
	}
	for _, e := range got {
		val := e.value(src)
		w, ok := want[e.key(src)]
		if !ok || !bytes.Equal(val, bytes.TrimSpace(w)) {
			t.Fatalf("member %q = %s, want %s", e.key(src), val, w)
		}
		switch val[0] {
		case '"':
			var s string
			_ = json.Unmarshal(val, &s)
			if unquote(val) != s {
				t.Fatalf("unquote(%s) = %q, want %q", val, unquote(val), s)
			}
		case '[':
			var elems []json.RawMessage
			_ = json.Unmarshal(val, &elems)
			got := elements(val)
			if len(got) != len(elems) {
				t.Fatalf("elements(%s) = %d, want %d", val, len(got), len(elems))
			}
			for i := range got {
				if !bytes.Equal(got[i], bytes.TrimSpace(elems[i])) {
					t.Fatalf("element %d = %s, want %s", i, got[i], elems[i])
				}
			}
		}
		if e.listed {
			sameMembers(t, a, src, val, a.at(e.kids))
		} else if e.kids != (span{}) {
			t.Fatalf("member %q has members but is not listed", e.key(src))
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []struct{ typ, body string }{
		{"object", `{"fields":{"a":{"type":"lookup","reference":"b"}},"listViews":{"x":{"data":{"object":"c"}}}}`},
		{"flow", `{"nodes":[{"type":"parallel","config":{"branches":[{"nodes":[{"type":"get_record","config":{"object":"x"}}]}]}}]}`},
		{"permission", `{"objects":{"*":{}},"fields":{"a.b":{}}}`},
		{"connector", `{"enabled":false,"auth":{"type":"bearer","credentialRef":"t"}}`},
		{"datasource", `{"active":true,"external":{"credentialsRef":"sys_secret:s"}}`},
		{"hook", `{"object":["a","*"]}`},
		{"report", `{"blocks":[{"dataset":"d"}]}`},
	} {
		f.Add(s.typ, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		it, err := Parse(typ, "n", body, Limits{})
		if err != nil {
			if _, ok := err.(*Fault); !ok || len(err.Error()) > 400 {
				t.Fatalf("Parse error %T %q", err, err)
			}
			return
		}
		seen := map[Reference]bool{}
		for _, r := range it.Refs {
			if seen[r] || blank(r.Name) {
				t.Fatalf("bad refs %v", it.Refs)
			}
			seen[r] = true
		}
		// Refs says the same of a body Parse accepted.
		lean, err := Refs(typ, "n", body, Limits{})
		if err != nil {
			t.Fatalf("Refs: %v", err)
		}
		if !slices.Equal(lean.Refs, it.Refs) || lean.Desired != it.Desired {
			t.Fatalf("Refs: %v %v, Parse: %v %v", lean.Refs, lean.Desired, it.Refs, it.Desired)
		}
	})
}
