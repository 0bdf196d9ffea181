package bench

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// coldResult is a cold start at one size: relist + materialize every entry
// with a no-op engine, the same work as a full reload.
type coldResult struct {
	Rows         int
	Items        int
	StartMS      float64 // median time to the first full sync
	HeapPerItem  float64 // bytes of live heap per item (median)
	RSSPerItem   float64 // bytes of resident memory per item (median)
	AllocPerItem float64 // bytes allocated per item during the start (median)
	MallocsPer   float64 // heap objects allocated per item during the start (median)
	GCs          float64 // collections during the start (median)
	RunsMeasured int
}

func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func measureCold(ctx context.Context, cfg Config, db *benchDB, runs int, logf func(string, ...any)) (coldResult, error) {
	res := coldResult{Rows: db.rows, RunsMeasured: runs}
	var start, heapPer, rssPer, allocPer, mallocsPer, gcs []float64
	for range runs {
		debug.FreeOSMemory()
		h0, r0 := heap(), rss()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		l, err := startLoop(ctx, db.url, loopOptions{interval: time.Second})
		if err != nil {
			return res, err
		}
		took := time.Since(t0)
		runtime.ReadMemStats(&m1)
		h1, r1 := heap(), rss()
		n := l.rec.Registries().Len(registry.KindEngine) +
			l.rec.Registries().Len(registry.KindCredential) +
			l.rec.Registries().Len(registry.KindDatasource)
		l.stop()
		res.Items = n
		start = append(start, ms(took))
		heapPer = append(heapPer, float64(h1-h0)/float64(n))
		rssPer = append(rssPer, float64(r1-r0)/float64(n))
		allocPer = append(allocPer, float64(m1.TotalAlloc-m0.TotalAlloc)/float64(n))
		mallocsPer = append(mallocsPer, float64(m1.Mallocs-m0.Mallocs)/float64(n))
		gcs = append(gcs, float64(m1.NumGC-m0.NumGC))
	}
	res.StartMS = median(start)
	res.HeapPerItem = median(heapPer)
	res.RSSPerItem = median(rssPer)
	res.AllocPerItem, res.MallocsPer, res.GCs = median(allocPer), median(mallocsPer), median(gcs)
	logf("cold start %8d rows: %d items in %.0f ms, %.0f B heap/item, %.0f B RSS/item; allocated %.0f B in %.1f objects per item, %.0f GCs",
		db.rows, res.Items, res.StartMS, res.HeapPerItem, res.RSSPerItem, res.AllocPerItem, res.MallocsPer, res.GCs)
	return res, nil
}

// ColdConfig is one cold-start measurement on its own (reconciler-bench-cold).
type ColdConfig struct {
	AdminURL string // PostgreSQL admin URL; the database is created beside it
	Rows     int    // sys_metadata rows seeded
	Runs     int    // cold starts measured (the figure is their median)
	Reuse    bool   // keep an existing seeded database of that size
}

// RunCold seeds (or reuses) a database of cfg.Rows rows and measures cold
// starts in this process: relist and materialize every entry with a no-op
// engine. Each start is a new store, loop and registries; the process is
// warm after the first (use -runs 1 and a fresh process for a cold figure).
func RunCold(ctx context.Context, cfg ColdConfig, log func(string, ...any)) (float64, error) {
	name := "reconciler_bench_cold_" + strconv.Itoa(cfg.Rows)
	var db *benchDB
	if cfg.Reuse {
		u, err := withDatabase(cfg.AdminURL, name)
		if err != nil {
			return 0, err
		}
		if s, err := snapshot.Open(u, snapshot.OpenOptions{}); err == nil {
			err = s.CheckSchema(ctx)
			s.Close()
			if err == nil {
				db = &benchDB{name: name, url: u, rows: cfg.Rows}
			}
		}
	}
	if db == nil {
		var err error
		if db, err = createDB(ctx, cfg.AdminURL, name, cfg.Rows); err != nil {
			return 0, err
		}
	}
	if cfg.Runs < 1 {
		return 0, nil
	}
	res, err := measureCold(ctx, Config{}, db, cfg.Runs, log)
	if err != nil {
		return 0, err
	}
	return res.StartMS, nil
}
