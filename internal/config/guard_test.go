package config

import (
	"strings"
	"testing"
)

func TestParseMaxEvictions(t *testing.T) {
	for in, want := range map[string]MaxEvictions{
		"off": {Off: true}, "OFF": {Off: true}, "20%": {Percent: 20}, "2.5%": {Percent: 2.5}, "100%": {Percent: 100}, "10": {Count: 10},
	} {
		if got, err := ParseMaxEvictions(in); err != nil || got != want {
			t.Errorf("ParseMaxEvictions(%q) = %+v, %v, want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-3", "0%", "101%", "ten", "20 %%"} {
		if _, err := ParseMaxEvictions(in); err == nil {
			t.Errorf("ParseMaxEvictions(%q) accepted", in)
		}
	}
}

func TestGuardKeys(t *testing.T) {
	c, err := Load(Source{File: writeFile(t, "{}\n"), Flags: flagSet(t)})
	if err != nil {
		t.Fatal(err)
	}
	if c.GuardMaxEvictions != "20%" || c.GuardWindow.String() != "1m0s" {
		t.Fatalf("defaults: %q %v", c.GuardMaxEvictions, c.GuardWindow)
	}
	t.Setenv("RECONCILER_GUARD_MAX_EVICTIONS", "lots")
	if _, err := Load(Source{File: writeFile(t, "{}\n"), Flags: flagSet(t)}); err == nil || !strings.Contains(err.Error(), KeyGuardMaxEvictions) {
		t.Fatalf("bad guard.max_evictions: %v", err)
	}
	t.Setenv("RECONCILER_GUARD_MAX_EVICTIONS", "off")
	t.Setenv("RECONCILER_GUARD_WINDOW", "10ms")
	if _, err := Load(Source{File: writeFile(t, "{}\n"), Flags: flagSet(t)}); err == nil || !strings.Contains(err.Error(), KeyGuardWindow) {
		t.Fatalf("bad guard.window: %v", err)
	}
}
