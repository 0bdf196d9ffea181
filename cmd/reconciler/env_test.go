package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUnknownEnvWarned: a misspelt RECONCILER_* variable (here the replica
// token's) is reported at start with the nearest key's variable, and its
// value never appears.
func TestUnknownEnvWarned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{dir: dir,
		env:  []string{"RECONCILER_REPLICA_TOKEN_EMV=canary-env-value"},
		args: []string{"--store.url", "sqlite://" + filepath.Join(dir, "store.db"), "--drift.schedule", ""}})
	out := d.out.String()
	if !strings.Contains(out, `"variable":"RECONCILER_REPLICA_TOKEN_EMV"`) || !strings.Contains(out, `"nearest":"RECONCILER_REPLICA_TOKEN_ENV"`) {
		t.Fatalf("no warning naming the variable and the nearest key:\n%s", out)
	}
	if strings.Contains(out, "canary-env-value") {
		t.Fatal("the variable's value was printed")
	}
}
