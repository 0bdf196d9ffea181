package snapshottest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Emptying a source table in one statement (TRUNCATE on PostgreSQL, which
// fires no row trigger; DELETE without WHERE on SQLite) surfaces every key
// it removed in the next poll, and a re-read finds them gone: the loop
// evicts them at once, not at the next anti-entropy relist.
func testTruncateSurfaces(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		db := Connect(t, url)
		var want []string
		for i := range 3 {
			db.Exec(t, InsertMetadata, fmt.Sprintf("m%d", i))
			want = append(want, fmt.Sprintf("sys_metadata/m%d", i))
			db.Exec(t, insSecret, fmt.Sprintf("s%d", i), "ct")
			want = append(want, fmt.Sprintf("sys_secret/s%d", i))
			db.Exec(t, insCred, fmt.Sprintf("c%d", i), "v")
			want = append(want, fmt.Sprintf("sys_connector_credential/c%d", i))
		}
		before, c := Relist(t, s)
		if before.Len() != 9 {
			t.Fatalf("relist: %d rows, want 9", before.Len())
		}
		empty := "DELETE FROM "
		if !strings.HasPrefix(url, "sqlite://") {
			empty = "TRUNCATE "
		}
		for _, tbl := range []string{"sys_metadata", "sys_secret", "sys_connector_credential"} {
			db.Exec(t, empty+tbl)
		}
		addrs, _ := Poll(t, s, c)
		WantAddrs(t, addrs, want...)
		rows, err := s.Read(ctx, addrs)
		if err != nil {
			t.Fatal(err)
		}
		if rows.Len() != 0 {
			t.Fatalf("re-read after emptying the tables: %d rows, want 0", rows.Len())
		}
		// A row written again after the truncate is a new row at a new revision.
		db.Exec(t, InsertMetadata, "m0")
		addrs, _ = Poll(t, s, c)
		rows, err = s.Read(ctx, addrs)
		if err != nil {
			t.Fatal(err)
		}
		if got, old := Revisions(rows)["sys_metadata/m0"], Revisions(before)["sys_metadata/m0"]; got <= old {
			t.Fatalf("m0 written again at revision %d, not above its first %d", got, old)
		}
	})
}
