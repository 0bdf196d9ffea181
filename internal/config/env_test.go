package config

import (
	"slices"
	"testing"
)

func TestCheckEnv(t *testing.T) {
	c, err := Parse("", nil, flagSet(t, "--replica.token_env=RECONCILER_REPLICA_TOKEN"))
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{
		"PATH=/bin",
		"RECONCILER_STORE_URL=postgres://h/db",          // a key
		"RECONCILER_REPLICA_TOKEN=osk_canary",           // named by replica.token_env
		"RECONCILER_TEST_DATABASE_URL=postgres://h/t",   // the tests' own
		"RECONCILER_REPLICA_TOKEN_EMV=RECONCILER_TOKEN", // a typo
		"RECONCILER_POLL_INTERVALL=2s",                  // a typo
		"RECONCILER_SOMETHING=x",
	}
	got := CheckEnv(environ, c)
	want := []UnknownEnv{
		{Name: "RECONCILER_REPLICA_TOKEN_EMV", Nearest: "RECONCILER_REPLICA_TOKEN_ENV"},
		{Name: "RECONCILER_POLL_INTERVALL", Nearest: "RECONCILER_POLL_INTERVAL"},
	}
	if len(got) != 3 || !slices.Equal(got[:2], want) || got[2].Name != "RECONCILER_SOMETHING" {
		t.Fatalf("CheckEnv = %+v, want %+v and RECONCILER_SOMETHING", got, want)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"ENV", "EMV", 1}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
