package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// newTestDriftWriter returns a drift writer over an empty SQLite store,
// writing to dir.
func newTestDriftWriter(t *testing.T, dir string) *driftWriter {
	t.Helper()
	store, err := snapshot.Open("sqlite://"+filepath.Join(t.TempDir(), "s.db"), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := PrepareStore(context.Background(), store, true, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	rec := reconcile.New(store, reconcile.Options{ReplicaID: "unit"})
	return &driftWriter{rec: rec, store: store, replicaID: "unit", dir: dir, log: slog.New(slog.DiscardHandler)}
}

// Drift reports hold the replica's view of every item: only the daemon's
// user may read them, whatever the umask.
func TestDriftFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports", "drift")
	if err := makeDriftDir(dir); err != nil {
		t.Fatal(err)
	}
	w := newTestDriftWriter(t, dir)
	if _, err := w.write(context.Background()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("drift.dir mode %v, want 0700", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("%d files, want a report and latest.json", len(entries))
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
}

// A drift.dir holding pattern characters is pruned like any other.
func TestPruneDriftPatternCharacters(t *testing.T) {
	for _, name := range []string{"plain", "drift[1]", "a*b?c", `back\slash`} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			if err := makeDriftDir(dir); err != nil {
				t.Fatal(err)
			}
			for i := range 7 {
				if err := writeAtomic(dir, fmt.Sprintf("drift-2026010%dT000000.000000000Z.json", i), []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			for _, other := range []string{LatestDriftFile, "notes.txt", "drift-notes.txt"} {
				if err := os.WriteFile(filepath.Join(dir, other), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			left := func() string {
				entries, _ := os.ReadDir(dir)
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				sort.Strings(names)
				return fmt.Sprint(names)
			}
			pruneDrift(dir, 3, 1<<20)
			want := []string{"drift-20260104T000000.000000000Z.json", "drift-20260105T000000.000000000Z.json", "drift-20260106T000000.000000000Z.json", "drift-notes.txt", LatestDriftFile, "notes.txt"}
			if got := left(); got != fmt.Sprint(want) {
				t.Fatalf("left %q, want %q", got, want)
			}
			// Past the size bound, fewer are kept; never fewer than the newest.
			pruneDrift(dir, 3, 4) // each report is 2 bytes
			if got, want := left(), fmt.Sprint([]string{"drift-20260105T000000.000000000Z.json", "drift-20260106T000000.000000000Z.json", "drift-notes.txt", LatestDriftFile, "notes.txt"}); got != want {
				t.Fatalf("size bound: left %q, want %q", got, want)
			}
			pruneDrift(dir, 3, 0)
			if got, want := left(), fmt.Sprint([]string{"drift-20260106T000000.000000000Z.json", "drift-notes.txt", LatestDriftFile, "notes.txt"}); got != want {
				t.Fatalf("size bound 0: left %q, want %q", got, want)
			}
		})
	}
}

// Concurrent requests for a report all get one; none fails.
func TestDriftWritesShared(t *testing.T) {
	dir := t.TempDir()
	w := newTestDriftWriter(t, dir)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = w.write(context.Background()) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if runs := w.writes.Runs(); int64(len(entries)) != runs+1 || runs > 20 {
		t.Fatalf("%d files for %d runs", len(entries), runs)
	}
}
