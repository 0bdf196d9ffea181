package snapshottest

import (
	"context"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// testBodiesAboveTheCapAreNotRead: with OpenOptions.MaxBodyBytes a body
// longer than the cap is neither sent nor read, on a relist and on a read
// of changed rows; only its length in bytes comes back (the loop holds it
// naming the cap), and every other row reads as usual.
func testBodiesAboveTheCapAreNotRead(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, _ snapshot.Store, url string) {
		ctx := context.Background()
		capped, err := snapshot.Open(url, snapshot.OpenOptions{MaxBodyBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(capped.Close)
		big := `{"fields":{"x":{"type":"text","label":"` + strings.Repeat("é", 1000) + `"}}}` // 2,000 bytes of é
		small := `{"fields":{"x":{"type":"text"}}}`
		Exec(t, url, UpsertMetadata, "big", "object", "big", nil, nil, "active", big, nil)
		Exec(t, url, UpsertMetadata, "small", "object", "small", nil, nil, "active", small, nil)

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

// testBodiesPastTheTotalAreWithheld: with OpenOptions.MaxTotalBytes a
// relist, a streamed relist and a read send bodies in id order while their
// sum stays within it; the later bodies (within the per-row cap) come back
// withheld with their length negated, to be read again; a body above the
// per-row cap counts for nothing and keeps its positive length.
func testBodiesPastTheTotalAreWithheld(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, _ snapshot.Store, url string) {
		ctx := context.Background()
		s, err := snapshot.Open(url, snapshot.OpenOptions{MaxBodyBytes: 1024, MaxTotalBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		body := `{"fields":{},"d":"` + strings.Repeat("x", 380) + `"}` // 400 bytes
		for _, id := range []string{"a", "b", "c", "d"} {
			Exec(t, url, UpsertMetadata, id, "object", id, nil, nil, "active", body, nil)
		}
		Exec(t, url, UpsertMetadata, "aa", "object", "aa", nil, nil, "active", `{"x":"`+strings.Repeat("y", 2000)+`"}`, nil)
		check := func(how string, rows snapshot.Rows) {
			t.Helper()
			got := map[string]snapshot.MetadataRow{}
			for _, m := range rows.Metadata {
				got[m.ID] = m
			}
			for id, want := range map[string]int64{"a": 0, "aa": 2008, "b": 0, "c": -400, "d": -400} {
				if m := got[id]; m.Withheld != want || (want == 0) != (m.Metadata != nil) || m.Revision == 0 {
					t.Fatalf("%s: row %s withheld %d (body %d bytes), want %d", how, id, m.Withheld, len(m.Metadata), want)
				}
			}
		}
		rows, _, err := s.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check("relist", rows)
		if st, ok := s.(snapshot.Streamer); ok {
			rows, _, err = st.RelistStream(ctx, func(int, []snapshot.MetadataRow) {})
			if err != nil {
				t.Fatal(err)
			}
			check("streamed relist", rows)
		}
		var addrs []snapshot.Address
		for _, id := range []string{"d", "c", "b", "aa", "a"} {
			addrs = append(addrs, snapshot.Address{Table: snapshot.TableMetadata, Key: id})
		}
		rows, err = s.Read(ctx, addrs)
		if err != nil {
			t.Fatal(err)
		}
		check("read", rows)
	})
}
