package reconcile

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// seedObjects inserts n objects (one lookup each) and n/10 views, with
// one statement that works on both stores.
func seedObjects(b *testing.B, url string, n int) {
	b.Helper()
	cast := "" // PostgreSQL needs text cast to jsonb; SQLite stores text
	if strings.HasPrefix(url, "postgres") {
		cast = "::jsonb"
	}
	snapshottest.Exec(b, url, fmt.Sprintf(`INSERT INTO sys_metadata (id, type, name, metadata)
		WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < %d)
		SELECT 'o' || x, 'object', 'obj' || x,
		  ('{"label":"Object ' || x || '","fields":{"name":{"type":"text"},"amount":{"type":"currency"},"parent":{"type":"lookup","reference":"obj' || ((x %% 100) + 1) || '"}}}')%s
		FROM g`, n, cast))
	snapshottest.Exec(b, url, fmt.Sprintf(`INSERT INTO sys_metadata (id, type, name, metadata)
		WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < %d)
		SELECT 'v' || x, 'view', 'view' || x, ('{"object":"obj' || x || '"}')%s FROM g`, n/10, cast))
}

func nopEngine() map[registry.Kind]Materializer {
	return map[registry.Kind]Materializer{registry.KindEngine: MaterializerFunc(
		func(context.Context, Desired) (registry.Instance, error) { return NopInstance{}, nil })}
}

// BenchmarkReconcile100k measures, at 100k entries: an idle pass, a pass
// with one changed key, and a full rebuild of every entry (what a replica
// restart costs today). It reports memory per entry of the registries and
// the loop's model.
func BenchmarkReconcile100k(b *testing.B) {
	const n = 100_000
	for _, bk := range snapshottest.Backends {
		b.Run(bk.Kind, func(b *testing.B) {
			s, url := bk.New(b)
			seedObjects(b, url, n)
			ctx := context.Background()
			opts := Options{ResyncInterval: -1, Materializers: nopEngine(), ApplyConcurrency: 4}

			// The loop's own part of a cold start: the model and the
			// apply of every entry, from rows read once (no store I/O).
			all, _, err := s.Relist(ctx)
			if err != nil {
				b.Fatal(err)
			}
			// cpu-ns/op is the process's CPU time per op (GC included):
			// on a shared machine it varies far less than ns/op.
			b.Run("cold-apply", func(b *testing.B) {
				b.ReportAllocs()
				var cpu time.Duration
				for b.Loop() {
					r := New(s, opts)
					c0 := cpuTime()
					_, _ = r.applyAll(ctx, all, nil)
					cpu += cpuTime() - c0
					b.StopTimer()
					r.shutdown(ctx)
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})

			b.Run("full-rebuild", func(b *testing.B) {
				c0 := cpuTime()
				for b.Loop() {
					r := New(s, opts)
					if err := r.pass(ctx, CauseStart, true); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r := New(s, opts)
			if err := r.pass(ctx, CauseStart, true); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			entries := r.regs.Of(registry.KindEngine).Len()
			perEntry := float64(after.HeapAlloc-before.HeapAlloc) / float64(entries)

			b.Run("idle-pass", func(b *testing.B) {
				for b.Loop() {
					if err := r.pass(ctx, CausePoll, false); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("one-change-pass", func(b *testing.B) {
				i := 0
				for b.Loop() {
					b.StopTimer()
					i++
					snapshottest.Exec(b, url, `UPDATE sys_metadata SET metadata = $1 WHERE id = 'o500'`,
						fmt.Sprintf(`{"fields":{"n%d":{"type":"text"}}}`, i))
					b.StartTimer()
					if err := r.pass(ctx, CausePoll, false); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(perEntry, "heap-B/entry")
			})
			r.shutdown(ctx)
		})
	}
}
