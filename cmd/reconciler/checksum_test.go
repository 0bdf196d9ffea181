package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// `checksum FILE|-` prints the platform's checksum of a body; `checksum
// --row ID` that of a stored row beside its stored one, with the fix.
func TestChecksumCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := `{"name":"task","fields":{"b":{"type":"text"},"a":{"type":"text"}}}`
	want, err := metadata.Checksum([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "task.json")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := reconciler(t, dir, nil, "checksum", file); r.code != 0 || r.stdout != want+"\n" {
		t.Fatalf("checksum FILE: %d %q %s", r.code, r.stdout, r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "checksum", "-")
	cmd.Env = proctest.CleanEnv()
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.Output()
	if err != nil || string(out) != want+"\n" {
		t.Fatalf("checksum -: %q %v", out, err)
	}
	if r := reconciler(t, dir, nil, "checksum", filepath.Join(dir, "absent.json")); r.code != 1 {
		t.Fatalf("absent file: %d %s", r.code, r.stderr)
	}

	url := snapshottest.NewSQLiteURL(t)
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, state, metadata, checksum) VALUES
  ('good', 'object', 'task', 'active', $1, $2),
  ('bad', 'object', 'task2', 'active', $1, 'sha256:0000000000000000000000000000000000000000000000000000000000000000'),
  ('none', 'object', 'task3', 'active', $1, NULL)`, body, want)
	for _, tc := range []struct {
		id    string
		match bool
	}{{"good", true}, {"bad", false}, {"none", true}} {
		r := reconciler(t, dir, nil, "checksum", "--row", tc.id, "--store.url", url, "--json")
		var got checksumRow
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
			t.Fatalf("--row %s: %d %s%s", tc.id, r.code, r.stdout, r.stderr)
		}
		if got.Body != want || got.Match != tc.match || (tc.match != (got.Fix == "")) {
			t.Errorf("--row %s: %+v", tc.id, got)
		}
	}
	r := reconciler(t, dir, nil, "checksum", "--row", "bad", "--store.url", url)
	if r.code != 0 || !strings.Contains(r.stdout, "MISMATCH") || !strings.Contains(r.stdout, "UPDATE sys_metadata SET checksum = '"+want+"' WHERE id = 'bad';") ||
		!strings.Contains(r.stdout, "checksum = NULL") {
		t.Fatalf("--row bad: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := reconciler(t, dir, nil, "checksum", "--row", "absent", "--store.url", url); r.code != 1 || !strings.Contains(r.stderr, `no sys_metadata row with id "absent"`) {
		t.Fatalf("--row absent: %d %s", r.code, r.stderr)
	}
}
