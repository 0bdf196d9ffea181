package datasource_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// newSQLiteFile creates a SQLite database at path holding table t (x=42).
func newSQLiteFile(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
}

// userVersion reads PRAGMA user_version of an existing file.
func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func sqliteRecord(key, path string) string {
	return record("sqlite", fmt.Sprintf(`{%q:%q}`, key, path), "", true)
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newSQLiteFile(t, filepath.Join(dir, "crm.db"))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	newSQLiteFile(t, filepath.Join(dir, "sub", "crm.db"))
	m := datasource.New(datasource.Options{SQLiteDir: dir})
	ctx := context.Background()

	for _, body := range []string{
		record("sqlite", `{"path":"crm.db"}`, `{"maxConns":3,"minConns":1,"maxConnLifetime":"1h","maxConnIdleTime":"1m"}`, true),
		sqliteRecord("path", filepath.Join(dir, "crm.db")),
		sqliteRecord("filename", "sub/crm.db"),
		sqliteRecord("path", "./sub//crm.db"),
	} {
		inst, err := m.Materialize(ctx, desired(body, canary))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		p := inst.(*datasource.Pool)
		var x int
		if err := p.SQL().QueryRowContext(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
			t.Fatalf("%s: x = %d, %v", body, x, err)
		}
		if p.PG() != nil || p.Driver() != "sqlite" || p.Name() != "crm" {
			t.Fatalf("pool = %v", p)
		}
		if err := inst.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.SQL().PingContext(ctx); err == nil {
			t.Fatal("db usable after Close")
		}
	}
	inst, err := m.Materialize(ctx, desired(record("sqlite", `{"path":"crm.db"}`, `{"maxConns":3}`, true), ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := inst.(*datasource.Pool).SQL().Stats().MaxOpenConnections; got != 3 {
		t.Fatalf("MaxOpenConnections = %d, want 3", got)
	}
	inst.Close()

	if err := os.WriteFile(filepath.Join(dir, "junk.db"), bytes.Repeat([]byte("not a database "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, err = m.Materialize(ctx, desired(sqliteRecord("path", "junk.db"), ""))
	assertClass(t, inst, err, reconcile.ClassInvalid, "datasource crm: junk.db is not a SQLite database")

	inst, err = m.Materialize(ctx, desired(sqliteRecord("path", "sub"), ""))
	assertClass(t, inst, err, reconcile.ClassInvalid, `datasource crm: config.path "sub" is not a regular file`)

	inst, err = m.Materialize(ctx, desired(sqliteRecord("path", "new.db"), ""))
	assertClass(t, inst, err, reconcile.ClassInvalid, `datasource crm: config.path "new.db": file does not exist (it is never created)`)
	if _, err := os.Stat(filepath.Join(dir, "new.db")); !os.IsNotExist(err) {
		t.Fatalf("new.db was created: %v", err)
	}

	inst, err = datasource.New(datasource.Options{}).Materialize(ctx, desired(sqliteRecord("path", filepath.Join(dir, "crm.db")), ""))
	assertClass(t, inst, err, reconcile.ClassInvalid,
		"datasource crm: config.path: sqlite files are not allowed: no directory is configured (set datasource.sqlite_dir)")

	inst, err = datasource.New(datasource.Options{SQLiteDir: filepath.Join(dir, "nope")}).Materialize(ctx, desired(sqliteRecord("path", "crm.db"), ""))
	assertClass(t, inst, err, reconcile.ClassTransient, `datasource crm: datasource.sqlite_dir "`+filepath.Join(dir, "nope")+`" is not accessible: …`)
}

// TestSQLiteAttacks: a row cannot name a file outside the allowed
// directory, create a file, or pass a parameter (a pragma) to the driver.
func TestSQLiteAttacks(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	newSQLiteFile(t, filepath.Join(root, "crm.db"))
	victim := filepath.Join(outside, "victim.db")
	newSQLiteFile(t, victim)
	if err := os.Symlink(victim, filepath.Join(root, "link.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linkdir")); err != nil {
		t.Fatal(err)
	}
	listing := func(d string) []string {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	beforeRoot, beforeOutside := listing(root), listing(outside)
	rel, err := filepath.Rel(root, victim)
	if err != nil {
		t.Fatal(err)
	}

	m := datasource.New(datasource.Options{SQLiteDir: root})
	for _, tt := range []struct{ path, reason string }{
		{"file:" + filepath.Join(outside, "x.db") + "?_pragma=journal_mode(wal)", "config.path must be a plain file path, not a file: URI"},
		{"file:" + victim + "?_pragma=user_version(42)", "config.path must be a plain file path, not a file: URI"},
		{"file:crm.db?mode=rwc&_pragma=user_version(42)", "config.path must be a plain file path, not a file: URI"},
		{filepath.Join(root, "crm.db") + "?_pragma=user_version(42)", "config.path must be a plain file path without ? or # (no driver parameters)"},
		{"crm.db?_pragma=user_version(42)", "config.path must be a plain file path without ? or # (no driver parameters)"},
		{"x.db?vfs=unix-none", "config.path must be a plain file path without ? or # (no driver parameters)"},
		{rel, "config.path must not contain a .. element"},
		{victim, `datasource crm: config.path "` + victim + `" is outside datasource.sqlite_dir (` + root + `)`},
		{filepath.Join(outside, "created.db"), `datasource crm: config.path "` + filepath.Join(outside, "created.db") + `" is outside datasource.sqlite_dir (` + root + `)`},
		{"link.db", `datasource crm: config.path "link.db" resolves outside datasource.sqlite_dir (through a symbolic link)`},
		{"linkdir/victim.db", `datasource crm: config.path "linkdir/victim.db" resolves outside datasource.sqlite_dir (through a symbolic link)`},
		{"linkdir/created.db", `datasource crm: config.path "linkdir/created.db": file does not exist (it is never created)`},
		{"/dev/null", `datasource crm: config.path "/dev/null" is outside datasource.sqlite_dir (` + root + `)`},
	} {
		inst, err := m.Materialize(context.Background(), desired(sqliteRecord("path", tt.path), ""))
		assertClass(t, inst, err, reconcile.ClassInvalid, tt.reason)
	}
	if got := listing(outside); !slices.Equal(got, beforeOutside) {
		t.Fatalf("files outside the allowed directory changed: %v, was %v", got, beforeOutside)
	}
	if got := listing(root); !slices.Equal(got, beforeRoot) {
		t.Fatalf("files in the allowed directory changed: %v, was %v", got, beforeRoot)
	}
	if v := userVersion(t, victim); v != 0 {
		t.Fatalf("a pragma ran on the victim: user_version = %d", v)
	}
	if v := userVersion(t, filepath.Join(root, "crm.db")); v != 0 {
		t.Fatalf("a pragma ran on crm.db: user_version = %d", v)
	}
}
