package snapshot_test

import (
	"context"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestBodiesAboveTheCapAreNotRead: with OpenOptions.MaxBodyBytes a body
// longer than the cap is neither sent nor read, on a relist and on a read
// of changed rows; only its length in bytes comes back (the loop holds it
// naming the cap), and every other row reads as usual.
func TestBodiesAboveTheCapAreNotRead(t *testing.T) {
	snapshottest.Each(t, func(t *testing.T, _ snapshot.Store, url string) {
		ctx := context.Background()
		capped, err := snapshot.Open(url, snapshot.OpenOptions{MaxBodyBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(capped.Close)
		big := `{"fields":{"x":{"type":"text","label":"` + strings.Repeat("é", 1000) + `"}}}` // 2,000 bytes of é
		small := `{"fields":{"x":{"type":"text"}}}`
		snapshottest.Exec(t, url, snapshottest.UpsertMetadata, "big", "object", "big", nil, nil, "active", big, nil)
		snapshottest.Exec(t, url, snapshottest.UpsertMetadata, "small", "object", "small", nil, nil, "active", small, nil)

		check := func(how string, rows snapshot.Rows) {
			t.Helper()
			got := map[string]snapshot.MetadataRow{}
			for _, m := range rows.Metadata {
				got[m.ID] = m
			}
			if b := got["big"]; b.Metadata != nil || b.Withheld != int64(len(big)) || b.Revision == 0 || b.Name != "big" {
				t.Fatalf("%s: big row %+v (body %d bytes), want no body and withheld %d", how, b, len(b.Metadata), len(big))
			}
			if s := got["small"]; string(s.Metadata) != small || s.Withheld != 0 {
				t.Fatalf("%s: small row %+v, want its body", how, s)
			}
		}
		rows, _, err := capped.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check("relist", rows)
		rows, err = capped.Read(ctx, []snapshot.Address{{Table: snapshot.TableMetadata, Key: "big"}, {Table: snapshot.TableMetadata, Key: "small"}})
		if err != nil {
			t.Fatal(err)
		}
		check("read", rows)

		// Without a cap the same rows read whole.
		uncapped, err := snapshot.Open(url, snapshot.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(uncapped.Close)
		rows, _, err = uncapped.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rows.Metadata {
			if m.ID == "big" && (string(m.Metadata) != big || m.Withheld != 0) {
				t.Fatalf("uncapped: big row withheld %d, body %d bytes", m.Withheld, len(m.Metadata))
			}
		}
	})
}
