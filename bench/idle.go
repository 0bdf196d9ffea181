package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// perTick is the cost of one idle poll (reconciler) or one tick (naive
// polling), averaged over one measuring window.
type perTick struct {
	Ticks      int64   // polls or ticks in the window
	RoundTrips float64 // client bursts answered by the server
	Rows       float64 // DataRow messages received
	Bytes      float64 // both directions
	ServerMS   float64 // pg_stat_statements total_exec_time, every statement
	StmtMS     float64 // the poll statement alone (reconciler); = ServerMS for naive
	ClientCPU  float64 // µs of this process's CPU (measured without the proxy)
}

func clientCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const pollStmtPrefix = "WITH cur AS (SELECT pg_current_snapshot()"

// ticker is something that polls: the reconciler's loop or naive polling.
type ticker interface {
	ticks() int64
	stop()
}

// window measures what the ticker t costs between now and d later.
func window(ctx context.Context, t ticker, px *proxy, ss *pgss, d time.Duration, pollOnly bool) (perTick, error) {
	var w0 wireCounts
	if px != nil {
		w0 = px.counts()
	}
	s0, err := ss.snap(ctx)
	if err != nil {
		return perTick{}, err
	}
	n0, c0 := t.ticks(), clientCPU()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return perTick{}, ctx.Err()
	}
	// A naive tick over 1M rows can outlast the window: wait for 3 ticks.
	for deadline := time.Now().Add(5 * time.Minute); t.ticks()-n0 < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	n1, c1 := t.ticks(), clientCPU()
	s1, err := ss.snap(ctx)
	if err != nil {
		return perTick{}, err
	}
	n := n1 - n0
	if n <= 0 {
		return perTick{}, fmt.Errorf("no tick in %v", d)
	}
	f := float64(n)
	out := perTick{Ticks: n, ClientCPU: float64((c1 - c0).Microseconds()) / f}
	all := diffStats(s0, s1, nil)
	out.ServerMS = all.MS / f
	out.StmtMS = out.ServerMS
	if pollOnly {
		out.StmtMS = diffStats(s0, s1, func(q string) bool { return strings.HasPrefix(q, pollStmtPrefix) }).MS / f
	}
	if px != nil {
		w := px.counts().sub(w0)
		out.RoundTrips = float64(w.RoundTrips) / f
		out.Rows = float64(w.Rows) / f
		out.Bytes = float64(w.BytesUp+w.BytesDown) / f
	}
	return out, nil
}

type loopTicker struct{ *loop }

func (l loopTicker) ticks() int64 { return l.idlePolls() }

// naive polls every source table's (key, revision) each tick and diffs it
// against the previous tick in memory, as a replica without a journal would.
type naive struct {
	conn   *pgx.Conn
	cancel context.CancelFunc
	done   chan struct{}
	n      chan int64
	err    error
}

func startNaive(ctx context.Context, dbURL string, interval time.Duration) (*naive, error) {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	nctx, cancel := context.WithCancel(ctx)
	nv := &naive{conn: c, cancel: cancel, done: make(chan struct{}), n: make(chan int64, 1)}
	nv.n <- 0
	go nv.run(nctx, interval)
	return nv, nil
}

func (nv *naive) run(ctx context.Context, interval time.Duration) {
	defer close(nv.done)
	prev := map[string]int64{}
	for ctx.Err() == nil {
		start := time.Now()
		cur := make(map[string]int64, len(prev))
		b := &pgx.Batch{}
		for _, q := range []string{
			"SELECT m.id, r.revision FROM sys_metadata m JOIN sys_reconciler_revision r ON r.source = 'sys_metadata' AND r.key = m.id WHERE m.state = 'active'",
			"SELECT 'c:' || ref, revision FROM sys_connector_credential",
			"SELECT 's:' || s.id, r.revision FROM sys_secret s JOIN sys_reconciler_revision r ON r.source = 'sys_secret' AND r.key = s.id",
		} {
			b.Queue(q).Query(func(rows pgx.Rows) error {
				var k string
				var r int64
				_, err := pgx.ForEachRow(rows, []any{&k, &r}, func() error { cur[k] = r; return nil })
				return err
			})
		}
		if err := nv.conn.SendBatch(ctx, b).Close(); err != nil {
			if ctx.Err() == nil {
				nv.err = err
			}
			return
		}
		changed := 0
		for k, r := range cur {
			if prev[k] != r {
				changed++
			}
		}
		_ = changed
		prev = cur
		nv.n <- <-nv.n + 1
		if d := interval - time.Since(start); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
	}
}

func (nv *naive) ticks() int64 {
	n := <-nv.n
	nv.n <- n
	return n
}

func (nv *naive) stop() {
	nv.cancel()
	<-nv.done
	nv.conn.Close(context.Background())
}

// idleResult is the idle cost of the reconciler and of naive polling at
// one size: medians over the runs.
type idleResult struct {
	Rows       int
	Reconciler perTick
	Naive      perTick
	Runs       int
}

// measureIdle runs the reconciler's loop and naive polling over db, each
// twice per run: through the counting proxy (wire and server figures) and
// directly (client CPU).
func measureIdle(ctx context.Context, cfg Config, db *benchDB, ss *pgss, logf func(string, ...any)) (idleResult, error) {
	res := idleResult{Rows: db.rows, Runs: cfg.Runs}
	target, err := hostPort(db.url)
	if err != nil {
		return res, err
	}
	px, err := newProxy(target)
	if err != nil {
		return res, err
	}
	defer px.close()
	proxied, err := viaProxy(db.url, px.addr())
	if err != nil {
		return res, err
	}
	type mk func(u string) (ticker, error)
	recon := func(u string) (ticker, error) {
		l, err := startLoop(ctx, u, loopOptions{interval: cfg.IdleInterval})
		if err != nil {
			return nil, err
		}
		return loopTicker{l}, nil
	}
	nv := func(u string) (ticker, error) { return startNaive(ctx, u, cfg.IdleInterval) }
	measure := func(name string, start mk, pollOnly bool, vias ...string) (perTick, error) {
		var wire, cpu []perTick
		for _, via := range vias {
			u, wpx := db.url, (*proxy)(nil)
			if via == "proxy" {
				u, wpx = proxied, px
			}
			t, err := start(u)
			if err != nil {
				return perTick{}, fmt.Errorf("%s idle at %d rows: %w", name, db.rows, err)
			}
			// Let the pool and the loop settle before measuring.
			time.Sleep(cfg.IdleInterval * 5)
			for range cfg.Runs {
				w, err := window(ctx, t, wpx, ss, cfg.IdleWindow, pollOnly)
				if err != nil {
					t.stop()
					return perTick{}, fmt.Errorf("%s idle at %d rows: %w", name, db.rows, err)
				}
				if wpx != nil {
					wire = append(wire, w)
				} else {
					cpu = append(cpu, w)
				}
			}
			t.stop()
		}
		both := append(slices.Clone(wire), cpu...)
		out := perTick{
			Ticks:      int64(median(pick(wire, func(p perTick) float64 { return float64(p.Ticks) }))),
			RoundTrips: median(pick(wire, func(p perTick) float64 { return p.RoundTrips })),
			Rows:       median(pick(wire, func(p perTick) float64 { return p.Rows })),
			Bytes:      median(pick(wire, func(p perTick) float64 { return p.Bytes })),
			ServerMS:   median(pick(both, func(p perTick) float64 { return p.ServerMS })),
			StmtMS:     median(pick(both, func(p perTick) float64 { return p.StmtMS })),
			ClientCPU:  median(pick(cpu, func(p perTick) float64 { return p.ClientCPU })),
		}
		logf("idle %-10s %8d rows: %.2f round trips, %.1f rows, %.0f B, server %.3f ms (poll stmt %.3f ms), client %.0f µs per tick",
			name, db.rows, out.RoundTrips, out.Rows, out.Bytes, out.ServerMS, out.StmtMS, out.ClientCPU)
		return out, nil
	}
	// The reconciler's client CPU is measured on the direct loop of the
	// change runs (measureChange), which saves a relist per size.
	if res.Reconciler, err = measure("reconciler", recon, true, "proxy"); err != nil {
		return res, err
	}
	if res.Naive, err = measure("naive", nv, false, "proxy", "direct"); err != nil {
		return res, err
	}
	return res, nil
}
