package snapshot_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

var benchSizes = []struct {
	name string
	n    int
}{{"1k", 1_000}, {"100k", 100_000}, {"1M", 1_000_000}}

// benchStore is a migrated store whose journal holds n entries, built on
// first use (so `go test` without -bench builds nothing), owned by the
// parent benchmark.
type benchStore struct {
	s   snapshot.Store
	url string
	c   snapshot.Cursor
}

func newBenchStore(b *testing.B, parent *testing.B, kind string, n int) *benchStore {
	ctx := context.Background()
	var bs benchStore
	switch kind {
	case "postgres":
		bs.s, bs.url = snapshottest.NewPostgres(parent)
		// Entries of n past transactions, spread below the current xmin as a
		// real journal's are.
		snapshottest.Exec(b, bs.url, `INSERT INTO sys_reconcile_journal (xid, source, key, op)
SELECT (3 + (g::numeric * (x.base - 4) / $1)::bigint)::text::xid8, 'sys_metadata', 'k' || g, 'update'
FROM generate_series(1, $1::int) g, (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS base) x`, n)
		snapshottest.Exec(b, bs.url, "VACUUM ANALYZE sys_reconcile_journal")
	case "sqlite":
		bs.s, bs.url = snapshottest.NewSQLite(parent)
		snapshottest.Exec(b, bs.url, `INSERT INTO sys_reconcile_journal (source, key, op)
WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < $1)
SELECT 'sys_metadata', 'k' || x, 'update' FROM g`, n)
		snapshottest.Exec(b, bs.url, "ANALYZE")
	}
	var err error
	if _, bs.c, err = bs.s.Relist(ctx); err != nil {
		b.Fatal(err)
	}
	if w, err := bs.s.Head(ctx); err != nil || w.Seq < int64(n) {
		b.Fatalf("journal head %+v, %v; want ≥ %d", w, err, n)
	}
	return &bs
}

func benchEach(b *testing.B, f func(b *testing.B, bs *benchStore)) {
	for _, kind := range []string{"postgres", "sqlite"} {
		for _, size := range benchSizes {
			var bs *benchStore
			parent := b
			b.Run(kind+"/"+size.name, func(b *testing.B) {
				if bs == nil {
					bs = newBenchStore(b, parent, kind, size.n)
				}
				b.ResetTimer()
				f(b, bs)
			})
		}
	}
}

// BenchmarkIdlePoll: a poll that finds nothing, whatever the journal size.
func BenchmarkIdlePoll(b *testing.B) {
	benchEach(b, func(b *testing.B, bs *benchStore) {
		ctx := context.Background()
		c := bs.c
		for b.Loop() {
			addrs, next, err := bs.s.Poll(ctx, c)
			if err != nil || len(addrs) != 0 {
				b.Fatalf("idle poll = %v, %v", addrs, err)
			}
			c = next
		}
	})
}

// BenchmarkPollDelta: a poll that finds one committed change (the write is
// not timed).
func BenchmarkPollDelta(b *testing.B) {
	benchEach(b, func(b *testing.B, bs *benchStore) {
		ctx := context.Background()
		db := snapshottest.Connect(b, bs.url)
		c := bs.c
		if _, next, err := bs.s.Poll(ctx, c); err == nil {
			c = next
		}
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			db.Exec(b, `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, 'v')
ON CONFLICT (ref) DO UPDATE SET value = excluded.value`, fmt.Sprint("bench-", i%100))
			b.StartTimer()
			addrs, next, err := bs.s.Poll(ctx, c)
			if err != nil || len(addrs) != 1 {
				b.Fatalf("delta poll = %v, %v", addrs, err)
			}
			c = next
		}
	})
}

// BenchmarkRelist100k: the cold start's read, a relist of 100k active
// metadata rows (bodies of ~150 bytes, some NULL columns, some versions
// that a float32 does not hold exactly) on PostgreSQL.
func BenchmarkRelist100k(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	s, url := snapshottest.NewPostgres(b)
	snapshottest.Exec(b, url, `INSERT INTO sys_metadata (id, type, name, organization_id, package_id, state, metadata,
  version, checksum, namespace, scope, strategy, source)
SELECT 'o' || x, 'object', 'obj' || x, 'org-' || (x % 7), CASE WHEN x % 3 = 0 THEN NULL ELSE 'pkg-' || (x % 5) END, 'active',
  '{"label":"Object ' || x || '","fields":{"name":{"type":"text"},"amount":{"type":"currency"},"parent":{"type":"lookup","reference":"obj' || ((x % 100) + 1) || '"}}}',
  1 + (x % 10) / 10.0, CASE WHEN x % 2 = 0 THEN NULL ELSE md5(x::text) END, 'default', 'platform', 'merge', 'api'
FROM generate_series(1, $1::int) x`, n)
	snapshottest.Exec(b, url, "VACUUM ANALYZE")
	b.ReportAllocs()
	for b.Loop() {
		rows, _, err := s.Relist(ctx)
		if err != nil || len(rows.Metadata) != n {
			b.Fatalf("relist: %d rows, %v; want %d", len(rows.Metadata), err, n)
		}
	}
}

// BenchmarkColumns: one servability check's catalog read (an object's
// table and columns).
func BenchmarkColumns(b *testing.B) {
	for _, bk := range snapshottest.Backends {
		b.Run(bk.Kind, func(b *testing.B) {
			s, url := bk.New(b)
			snapshottest.Exec(b, url, `CREATE TABLE rt_task (id varchar(255) PRIMARY KEY, created_at text, updated_at text, title text, owner text)`)
			cat := s.(snapshot.Catalog)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, ok, err := cat.Columns(ctx, "rt_task"); err != nil || !ok {
					b.Fatal(err)
				}
			}
		})
	}
}
