package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
)

// migrate refuses a PostgreSQL database holding other tables but no
// sys_metadata (a wrong store.url), naming it, unless
// --create-platform-tables; an empty database migrates as before; run
// --migrate refuses it too.
func TestMigrateRefusesAForeignDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	empty := testdb.New(t)
	if r := reconciler(t, dir, nil, "migrate", "--store.url", empty); r.code != 0 {
		t.Fatalf("empty database: %d %s", r.code, r.stderr)
	}

	foreign := testdb.New(t)
	if err := testdb.Exec(ctx, foreign, `CREATE TABLE invoices (id int); CREATE TABLE customers (id int)`); err != nil {
		t.Fatal(err)
	}
	r := reconciler(t, dir, nil, "migrate", "--store.url", foreign)
	if r.code != 1 || !strings.Contains(r.stderr, "holds 2 tables (customers, invoices) but no sys_metadata") ||
		!strings.Contains(r.stderr, "--create-platform-tables") || !strings.Contains(r.stderr, `database "`) {
		t.Fatalf("foreign database: %d %s", r.code, r.stderr)
	}
	if n := tableCount(t, foreign); n != 2 {
		t.Fatalf("refused migrate left %d tables, want the 2 it found", n)
	}
	if r := reconciler(t, dir, nil, "run", "--migrate", "--store.url", foreign, "--status.listen", "127.0.0.1:0"); r.code != 1 || !strings.Contains(r.stderr+r.stdout, "no sys_metadata") {
		t.Fatalf("run --migrate on the foreign database: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := reconciler(t, dir, nil, "migrate", "--store.url", foreign, "--create-platform-tables"); r.code != 0 {
		t.Fatalf("--create-platform-tables: %d %s", r.code, r.stderr)
	}
	// Now it has sys_metadata: a plain migrate passes.
	if r := reconciler(t, dir, nil, "migrate", "--store.url", foreign); r.code != 0 {
		t.Fatalf("second migrate: %d %s", r.code, r.stderr)
	}
}

func tableCount(t *testing.T, url string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(allRows(t, url, "pg_tables"), "\n") {
		if strings.Contains(line, `"schemaname":"public"`) {
			n++
		}
	}
	return n
}
