package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// fleetResult is the database's cost of N reconcilers polling it.
type fleetResult struct {
	Reconcilers int
	CPUPercent  float64 // of one core: every process of the cluster
	StmtPerSec  float64 // pg_stat_statements calls per second
	ExecMSPerS  float64 // statement execution time per second
}

// measureFleet runs n reconcilers (each its own store pool, polling every
// FleetInterval with the default 10% jitter) for each n in FleetSizes, after
// a baseline with none, and reads the cluster's CPU from /proc.
func measureFleet(ctx context.Context, cfg Config, db *benchDB, ss *pgss, logf func(string, ...any)) ([]fleetResult, error) {
	cpu, err := findPostmaster(ctx, cfg.AdminURL)
	if err != nil {
		return nil, err
	}
	var out []fleetResult
	for _, n := range append([]int{0}, cfg.FleetSizes...) {
		loops := make([]*loop, n)
		ferr := startEach(n, 4, func(i int) error {
			l, err := startLoop(ctx, db.url, loopOptions{interval: cfg.FleetInterval, jitter: true, maxConns: 2})
			loops[i] = l
			return err
		})
		stopAll := func() {
			for _, l := range loops {
				if l != nil {
					l.stop()
				}
			}
		}
		if ferr != nil {
			stopAll()
			return nil, fmt.Errorf("start %d reconcilers: %w", n, ferr)
		}
		time.Sleep(2 * cfg.FleetInterval)
		var cpus, stmts, execs []float64
		for range cfg.Runs {
			c0 := cpu.total()
			s0, err := ss.snap(ctx)
			if err != nil {
				stopAll()
				return nil, err
			}
			t0 := time.Now()
			time.Sleep(cfg.FleetWindow)
			c1 := cpu.total()
			s1, err := ss.snap(ctx)
			if err != nil {
				stopAll()
				return nil, err
			}
			el := time.Since(t0).Seconds()
			d := diffStats(s0, s1, nil)
			cpus = append(cpus, 100*cpuDelta(c0, c1).Seconds()/el)
			stmts = append(stmts, float64(d.Calls)/el)
			execs = append(execs, d.MS/el)
		}
		stopAll()
		r := fleetResult{Reconcilers: n, CPUPercent: median(cpus), StmtPerSec: median(stmts), ExecMSPerS: median(execs)}
		logf("fleet %2d reconcilers: database CPU %.2f%% of a core, %.1f statements/s, %.2f ms exec/s", n, r.CPUPercent, r.StmtPerSec, r.ExecMSPerS)
		out = append(out, r)
	}
	return out, nil
}

// startEach calls start(i) for each i below n, at most par at a time, and
// returns one of the errors (nil when every call succeeded).
func startEach(n, par int, start func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ferr error
	)
	sem := make(chan struct{}, par)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := start(i); err != nil {
				mu.Lock()
				ferr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ferr
}
