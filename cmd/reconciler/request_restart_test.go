package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRequestRestart: the file appears whole with the request's time; a
// second request replaces it; a directory that does not exist fails,
// naming the file.
func TestRequestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "requested")
	before := time.Now().Add(-time.Second)
	for range 2 {
		if r := reconciler(t, dir, nil, "request-restart", file); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil || at.Before(before) {
		t.Fatalf("content %q: %v", b, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	if r := reconciler(t, dir, nil, "request-restart", filepath.Join(dir, "no", "such")); r.code != 1 || !strings.Contains(r.stderr, "no/such") {
		t.Fatalf("missing directory: exit %d: %s", r.code, r.stderr)
	}
	if r := reconciler(t, dir, nil, "request-restart"); r.code != 2 {
		t.Fatalf("no argument: exit %d", r.code)
	}
}
