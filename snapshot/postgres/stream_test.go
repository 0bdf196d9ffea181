package postgres_test

import (
	"fmt"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// A streaming relist (PostgreSQL) hands over every metadata row once, in
// order, in runs that are the result's own rows, while it reads them; its
// result is Relist's.
func TestRelistStreamHandsEveryRow(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewPostgres(t)
	st, ok := s.(snapshot.Streamer)
	if !ok {
		t.Fatalf("%T does not stream its relist", s)
	}
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata)
		SELECT 'o' || lpad(x::text, 5, '0'), 'object', 'obj' || x, '{"fields":{}}' FROM generate_series(1, 2500) x`)
	ctx := snapshottest.Ctx(t)
	var got []snapshot.MetadataRow
	var offsets []int
	rows, _, err := st.RelistStream(ctx, func(offset int, batch []snapshot.MetadataRow) {
		offsets = append(offsets, offset)
		got = append(got, batch...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offsets) < 3 || offsets[0] != 0 {
		t.Fatalf("batches at %v: want several, from 0", offsets)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", rows.Metadata) {
		t.Fatal("the batches differ from the result's metadata rows")
	}
	plain, _, err := s.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", plain) != fmt.Sprintf("%+v", rows) {
		t.Fatal("RelistStream's result differs from Relist's")
	}
}
