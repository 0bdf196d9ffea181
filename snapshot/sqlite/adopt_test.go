package sqlite_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
	"github.com/objectstack-fleet/reconciler/snapshot/sqlite"
)

// TestAdoptSQLite: the same on SQLite: tables that exist before migrate
// (here in the platform's shape, from the files Migrate would use) keep
// their definition and indexes, their rows get revisions, and later writes
// are journaled.
func TestAdoptSQLite(t *testing.T) {
	t.Parallel()
	ctx := snapshottest.Ctx(t)
	dbURL := "sqlite://" + t.TempDir() + "/adopt.db"
	db := snapshottest.Connect(t, dbURL)
	for _, f := range []string{"migrations/tables/sys_metadata.sql", "migrations/tables/sys_secret.sql"} {
		ddl, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		db.Exec(t, string(ddl))
	}
	db.Exec(t, snapshottest.UpsertMetadata, "o1", "object", "account", nil, nil, "active", `{"fields":{}}`, nil)
	db.Exec(t, snapshottest.UpsertMetadata, "d1", "object", "account", nil, nil, "draft", `{"fields":{}}`, nil)
	db.Exec(t, snapshottest.UpsertSecret, "sec_1", "datasource", "wh", "djE6eA")
	const defs = `SELECT count(*) FROM sqlite_master WHERE tbl_name IN ('sys_metadata', 'sys_secret') AND type IN ('table', 'index')`
	const text = `SELECT group_concat(type || ' ' || name || ' ' || coalesce(sql, ''), char(10)) FROM
  (SELECT * FROM sqlite_master WHERE tbl_name IN ('sys_metadata', 'sys_secret') AND type IN ('table', 'index') ORDER BY name)`
	nBefore := db.Int(t, defs)
	before := sqliteText(t, dbURL, text)

	s, err := snapshot.Open(dbURL, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if n, after := db.Int(t, defs), sqliteText(t, dbURL, text); n != nBefore || after != before {
		t.Fatalf("migrate changed the adopted tables:\n%s", snapshottest.DiffLines(before, after))
	}
	rows, c := snapshottest.Relist(t, s)
	if len(rows.Metadata) != 1 || rows.Metadata[0].ID != "o1" || rows.Metadata[0].Revision <= 0 ||
		len(rows.Secrets) != 1 || rows.Secrets[0].Revision <= 0 {
		t.Fatalf("relist after adoption: %+v", rows)
	}
	db.Exec(t, snapshottest.UpsertMetadata, "d1", "object", "account", nil, nil, "active", `{"fields":{"a":{}}}`, nil)
	db.Exec(t, `DELETE FROM sys_metadata WHERE id = 'o1'`)
	got, _ := snapshottest.Poll(t, s, c)
	snapshottest.WantAddrs(t, got, "sys_metadata/d1", "sys_metadata/o1")
}

func sqliteText(t *testing.T, dbURL, query string) string {
	t.Helper()
	path, err := sqlite.Path(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s string
	if err := db.QueryRowContext(snapshottest.Ctx(t), query).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
