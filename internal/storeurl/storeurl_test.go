package storeurl

import (
	"errors"
	"testing"
)

// The registry as a fresh process sees it: a test registers its own
// schemes (the real backends register theirs through snapshot.Register).
func TestLookup(t *testing.T) {
	Register(Scheme{Kind: "zz-server", Names: []string{"zzs", "ZZServer"}, Form: "zzs://…", Standby: true})
	Register(Scheme{Kind: "zz-file", Names: []string{"zzf"}, Form: "zzf://PATH"})
	for _, c := range []struct {
		url, kind string
	}{{"zzs://h/db", "zz-server"}, {"ZZSERVER://h/db", "zz-server"}, {"zzf://x.db", "zz-file"}} {
		if s, err := Lookup(c.url); err != nil || s.Kind != c.kind {
			t.Errorf("Lookup(%q) = %q, %v; want %q", c.url, s.Kind, err, c.kind)
		}
	}
	var unknown *UnknownError
	if _, err := Lookup("Other://x"); !errors.As(err, &unknown) || unknown.Scheme != "Other" {
		t.Errorf("Lookup of an unknown scheme = %v, want an UnknownError naming it as written", err)
	}
	for _, u := range []string{"", "just-a-path", "://x"} {
		if _, err := Lookup(u); !errors.Is(err, ErrNoScheme) {
			t.Errorf("Lookup(%q) = %v, want ErrNoScheme", u, err)
		}
	}
	if got, want := Want(), "zzf://, zzs:// or zzserver://"; got != want {
		t.Errorf("Want() = %q, want %q", got, want)
	}
	if got, want := WantForms(), "zzf://PATH or zzs://…"; got != want {
		t.Errorf("WantForms() = %q, want %q", got, want)
	}
	if got, want := WantStandby(), "zzs://"; got != want {
		t.Errorf("WantStandby() = %q, want %q", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a scheme twice did not panic")
		}
	}()
	Register(Scheme{Kind: "zz-again", Names: []string{"zzf"}})
}
