package sqlite_test

import (
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestBadValuesDoNotFailTheRead: SQLite keeps whatever a writer stores in
// any column (bytes that are not UTF-8, text in a REAL column); such a row
// reads as stored and the other rows read normally.
func TestBadValuesDoNotFailTheRead(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewSQLite(t)
	db := snapshottest.Connect(t, url)
	db.Exec(t, snapshottest.InsertMetadata, "good")
	db.Exec(t, snapshottest.InsertMetadata, "bad")
	db.Exec(t, `UPDATE sys_metadata SET metadata = X'FF00FE', version = 'not a number', name = 42, checksum = X'00' WHERE id = 'bad'`)
	rows, _ := snapshottest.Relist(t, s)
	if len(rows.Metadata) != 2 {
		t.Fatalf("relist: %+v", rows.Metadata)
	}
	bad, good := rows.Metadata[0], rows.Metadata[1]
	if string(bad.Metadata) != "\xff\x00\xfe" || bad.Version != 0 || bad.Name != "42" || bad.Checksum != "\x00" {
		t.Fatalf("bad row read as %+v", bad)
	}
	if good.ID != "good" || string(good.Metadata) != `{"fields":{}}` || good.Version != 1 {
		t.Fatalf("good row read as %+v", good)
	}
}

// TestSQLiteInsertOrReplace: SQLite's INSERT OR REPLACE deletes the row it
// conflicts with without firing its DELETE trigger; the replaced row's
// address is journaled all the same.
func TestSQLiteInsertOrReplace(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewSQLite(t)
	db := snapshottest.Connect(t, url)
	const ins = `INSERT OR REPLACE INTO sys_metadata (id, type, name, organization_id, package_id, metadata)
VALUES ($1, 'view', 'all', 'org-1', 'crm', '{}')`
	db.Exec(t, ins, "first")
	_, c := snapshottest.Relist(t, s)
	db.Exec(t, ins, "second")
	got, _ := snapshottest.Poll(t, s, c)
	snapshottest.WantAddrs(t, got, "sys_metadata/first", "sys_metadata/second")
	rows, err := s.Read(snapshottest.Ctx(t), got)
	if err != nil || len(rows.Metadata) != 1 || rows.Metadata[0].ID != "second" {
		t.Fatalf("read after replace = %+v, %v", rows.Metadata, err)
	}
}
