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
)

// coldResult is a cold start at one size: relist + materialize every entry
// with a no-op engine, the same work as a full reload.
type coldResult struct {
	Rows         int
	Items        int
	StartMS      float64 // median time to the first full sync
	HeapPerItem  float64 // bytes of live heap per item (median)
	RSSPerItem   float64 // bytes of resident memory per item (median)
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
	var start, heapPer, rssPer []float64
	for range runs {
		debug.FreeOSMemory()
		h0, r0 := heap(), rss()
		t0 := time.Now()
		l, err := startLoop(ctx, db.url, loopOptions{interval: time.Second})
		if err != nil {
			return res, err
		}
		took := time.Since(t0)
		h1, r1 := heap(), rss()
		n := l.rec.Registries().Len(registry.KindEngine) +
			l.rec.Registries().Len(registry.KindCredential) +
			l.rec.Registries().Len(registry.KindDatasource)
		l.stop()
		res.Items = n
		start = append(start, ms(took))
		heapPer = append(heapPer, float64(h1-h0)/float64(n))
		rssPer = append(rssPer, float64(r1-r0)/float64(n))
	}
	res.StartMS = median(start)
	res.HeapPerItem = median(heapPer)
	res.RSSPerItem = median(rssPer)
	logf("cold start %8d rows: %d items in %.0f ms, %.0f B heap/item, %.0f B RSS/item",
		db.rows, res.Items, res.StartMS, res.HeapPerItem, res.RSSPerItem)
	return res, nil
}
