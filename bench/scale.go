package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// ScaleConfig tunes RunScale.
type ScaleConfig struct {
	Sizes    []int         // reconcilers polling at once
	Modes    []string      // "direct", "pgbouncer", "standby", "standby-pgbouncer"
	Interval time.Duration // their poll.interval
	Window   time.Duration // one measuring window
	Rows     int           // rows of the store
	RatioN   int           // reconcilers (and SELECT 1 pingers) of the per-poll ratio
	// StandbyMax is the largest fleet of mode standby (0: every size): it
	// holds a direct connection per reconciler on each server.
	StandbyMax int
	OutDir     string
	Command    string // how the report was produced
}

// scaleRow is one mode × fleet size.
type scaleRow struct {
	Mode        string
	N           int
	PrimaryCPU  float64 // % of one core, every process of the primary, idle baseline included
	StandbyCPU  float64 // % of one core of the standby (mode standby)
	BouncerCPU  float64 // % of one core of PgBouncer (modes pgbouncer, standby-pgbouncer: both)
	Backends    int     // client backends on the primary
	PollsPerSec float64
	StmtPerSec  float64 // pg_stat_statements calls/s on the primary
}

// scaleRatio is the per-poll server cost of the reconciler's statements
// over SELECT 1's, on the same connections.
type scaleRatio struct {
	Mode             string
	N                int
	RecCPUPerPollUS  float64 // server CPU per poll, all statements amortized (µs)
	PingCPUPerPingUS float64 // server CPU per SELECT 1 (µs)
	Ratio            float64
}

// stmtLine is one statement of the primary's pg_stat_statements.
type stmtLine struct {
	Query    string
	PerSec   float64
	MeanUS   float64
	PerPollS float64 // calls per poll
}

// ScaleResult is what RunScale measured.
type ScaleResult struct {
	Rows       []scaleRow
	Ratios     []scaleRatio
	Statements map[string][]stmtLine // per mode, at the largest size
	Baseline   map[string]float64    // idle % of one core per mode, nobody polling
	Warnings   []string
}

// RunScale measures fleets of reconcilers polling one primary at
// Interval: directly, through PgBouncer in transaction mode, and reading a
// hot standby (store.read_url). Each mode gets a private cluster.
func RunScale(ctx context.Context, cfg ScaleConfig, log *slog.Logger) (*ScaleResult, error) {
	logf := func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...)) }
	res := &ScaleResult{Statements: map[string][]stmtLine{}, Baseline: map[string]float64{}}
	maxN := 0
	for _, n := range cfg.Sizes {
		maxN = max(maxN, n, cfg.RatioN)
	}
	for _, mode := range cfg.Modes {
		if err := scaleMode(ctx, cfg, mode, maxN, res, logf); err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %v", mode, err))
			logf("mode %s failed: %v", mode, err)
		}
	}
	if err := writeScale(cfg, res); err != nil {
		return res, err
	}
	return res, nil
}

// scaleEnv is one mode's servers and the URLs its clients use.
type scaleEnv struct {
	primary, standby *pgCluster
	bouncers         []*pgBouncer // in front of the primary, then of the standby
	url, readURL     string       // the reconcilers' store.url and store.read_url
	pingURL          string       // where SELECT 1 goes: where polls go
}

func (e *scaleEnv) close() {
	for _, b := range e.bouncers {
		b.stop()
	}
	if e.standby != nil {
		e.standby.remove()
	}
	if e.primary != nil {
		e.primary.remove()
	}
}

func scaleMode(ctx context.Context, cfg ScaleConfig, mode string, maxN int, res *ScaleResult, logf func(string, ...any)) error {
	// Direct and standby need a backend per reconciler pool connection.
	primary, err := startPrimary(2*maxN + 50)
	if err != nil {
		return err
	}
	env := &scaleEnv{primary: primary}
	defer env.close()
	admin := primary.url("postgres")
	if err := execOn(ctx, admin, "CREATE DATABASE store"); err != nil {
		return err
	}
	storeURL := primary.url("store")
	db := &benchDB{name: "store", url: storeURL}
	{
		s, err := snapshot.Open(storeURL, snapshot.OpenOptions{})
		if err != nil {
			return err
		}
		err = s.Migrate(ctx)
		s.Close()
		if err != nil {
			return err
		}
	}
	if err := db.seed(ctx, cfg.Rows); err != nil {
		return err
	}
	if err := execOn(ctx, storeURL, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return err
	}
	env.url, env.pingURL = storeURL, storeURL
	switch mode {
	case "direct":
	case "pgbouncer":
		b, err := startPgBouncer(ctx, primary, 20)
		if err != nil {
			return err
		}
		env.bouncers = append(env.bouncers, b)
		env.url = b.url(primary.user, "store", "exec")
		env.pingURL = env.url
	case "standby", "standby-pgbouncer":
		env.standby, err = primary.standby()
		if err != nil {
			return err
		}
		env.readURL = env.standby.url("store")
		if mode == "standby-pgbouncer" {
			// A large fleet's deployment: both servers behind PgBouncer in
			// transaction mode (a backend per pooled server connection,
			// not per replica).
			for _, c := range []*pgCluster{primary, env.standby} {
				b, err := startPgBouncer(ctx, c, 20)
				if err != nil {
					return err
				}
				env.bouncers = append(env.bouncers, b)
			}
			env.url = env.bouncers[0].url(primary.user, "store", "exec")
			env.readURL = env.bouncers[1].url(primary.user, "store", "exec")
		}
		env.pingURL = env.readURL
	default:
		return fmt.Errorf("unknown mode %q (want direct, pgbouncer, standby or standby-pgbouncer)", mode)
	}
	pm, err := primary.postmaster()
	if err != nil {
		return err
	}
	sm := 0
	if env.standby != nil {
		if sm, err = env.standby.postmaster(); err != nil {
			return err
		}
	}
	ss, err := openPGSS(ctx, db)
	if err != nil {
		return err
	}
	defer ss.close()

	bouncerCPU := func() map[int]int64 {
		out := map[int]int64{}
		for _, b := range env.bouncers {
			maps.Copy(out, cpuNS(b.pid()))
		}
		return out
	}
	// measure takes the servers' CPU over one window, and the primary's
	// statements over the same window: each pg_stat_statements snapshot is
	// dated at the middle of its read (under overload a read takes long).
	measure := func(count func() int64) (p, s, b float64, perSec float64, stmts statsDelta, stmtSecs float64, lines []stmtLine, err error) {
		snapAt := func() (stmtStats, time.Time, error) {
			t := time.Now()
			q, err := ss.snap(ctx)
			return q, t.Add(time.Since(t) / 2), err
		}
		q0, tq0, err := snapAt()
		if err != nil {
			return
		}
		c0, s0, b0 := cpuNS(pm), cpuNS(sm), bouncerCPU()
		n0, t0 := count(), time.Now()
		select {
		case <-time.After(cfg.Window):
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		el := time.Since(t0).Seconds()
		n1 := count()
		c1, s1, b1 := cpuNS(pm), cpuNS(sm), bouncerCPU()
		q1, tq1, err := snapAt()
		if err != nil {
			return
		}
		p = 100 * nsDelta(c0, c1).Seconds() / el
		if sm != 0 {
			s = 100 * nsDelta(s0, s1).Seconds() / el
		}
		b = 100 * nsDelta(b0, b1).Seconds() / el
		perSec = float64(n1-n0) / el
		stmtSecs = tq1.Sub(tq0).Seconds()
		stmts = diffStats(q0, q1, func(q string) bool { return !strings.Contains(q, "pg_stat_statements") })
		lines = statementLines(q0, q1, stmtSecs, perSec)
		return
	}

	// Nobody polling: the cluster's own background work.
	basePrimary, baseStandby, _, _, _, _, _, err := measure(func() int64 { return 0 })
	if err != nil {
		return err
	}
	res.Baseline[mode] = basePrimary + baseStandby
	logf("%s: idle baseline %.2f%% (primary) + %.2f%% (standby) of a core", mode, basePrimary, baseStandby)

	sizes := append([]int(nil), cfg.Sizes...)
	if !containsInt(sizes, cfg.RatioN) {
		sizes = append(sizes, cfg.RatioN)
	}
	sort.Ints(sizes)
	for _, n := range sizes {
		if mode == "standby" && cfg.StandbyMax > 0 && n > cfg.StandbyMax {
			res.Warnings = append(res.Warnings, fmt.Sprintf("standby: %d reconcilers not run (-standby-max %d): a direct connection per reconciler on each server "+
				"is %d backends, which do not all start within 20 minutes on a 2-core machine that also runs the fleet; standby-pgbouncer is the same at any size", n, cfg.StandbyMax, 2*n))
			continue
		}
		fleet, err := startFleet(ctx, env, n, cfg.Interval)
		if err != nil {
			return fmt.Errorf("start %d reconcilers: %w", n, err)
		}
		// Let the starts (relists) settle before measuring.
		time.Sleep(2 * cfg.Interval)
		p, s, b, polls, st, stmtSecs, lines, err := measure(fleet.polls.Load)
		backends := countBackends(ctx, admin)
		fleet.stop()
		if err != nil {
			return err
		}
		row := scaleRow{Mode: mode, N: n, PrimaryCPU: p, StandbyCPU: s, BouncerCPU: b, Backends: backends,
			PollsPerSec: polls, StmtPerSec: float64(st.Calls) / stmtSecs}
		if containsInt(cfg.Sizes, n) {
			res.Rows = append(res.Rows, row)
			logf("%s %5d reconcilers: primary %.2f%%, standby %.2f%%, pgbouncer %.2f%% of a core; %d backends; %.0f polls/s; %.0f statements/s on the primary",
				mode, n, p, s, b, backends, polls, row.StmtPerSec)
			if n == slicesMax(cfg.Sizes) {
				res.Statements[mode] = lines
			}
		}
		if n == cfg.RatioN {
			ping, err := startPingers(ctx, env.pingURL, n, cfg.Interval)
			if err != nil {
				return fmt.Errorf("start %d SELECT 1 pingers: %w", n, err)
			}
			time.Sleep(2 * cfg.Interval)
			pp, ps, _, pings, _, _, _, err := measure(ping.count.Load)
			ping.stop()
			if err != nil {
				return err
			}
			base := basePrimary + baseStandby
			rec := (p + s - base) / 100 / polls * 1e6 // µs of CPU per poll
			one := (pp + ps - base) / 100 / pings * 1e6
			r := scaleRatio{Mode: mode, N: n, RecCPUPerPollUS: rec, PingCPUPerPingUS: one, Ratio: rec / one}
			res.Ratios = append(res.Ratios, r)
			logf("%s per poll (%d at once): reconciler %.0f µs of server CPU, SELECT 1 %.0f µs: %.2f×", mode, n, rec, one, r.Ratio)
		}
	}
	return nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func slicesMax(s []int) int {
	m := 0
	for _, x := range s {
		m = max(m, x)
	}
	return m
}

func execOn(ctx context.Context, url, q string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, q)
	return err
}

func countBackends(ctx context.Context, admin string) int {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return -1
	}
	defer c.Close(ctx)
	var n int
	_ = c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&n)
	return n
}

// statementLines lists the primary's statements of a window, busiest
// first.
func statementLines(before, after stmtStats, el, polls float64) []stmtLine {
	var out []stmtLine
	for id, a := range after {
		b := before[id]
		calls := a.calls - b.calls
		if calls <= 0 || strings.Contains(a.query, "pg_stat_statements") {
			continue
		}
		l := stmtLine{Query: oneLine(a.query), PerSec: float64(calls) / el, MeanUS: 1000 * (a.ms - b.ms) / float64(calls)}
		if polls > 0 {
			l.PerPollS = float64(calls) / el / polls
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PerSec*out[i].MeanUS > out[j].PerSec*out[j].MeanUS })
	if len(out) > 8 {
		out = out[:8]
	}
	return out
}

func oneLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 90 {
		q = q[:87] + "..."
	}
	return q
}

// fleet is n reconcilers in this process, each with its own store pools
// and heartbeat, as n daemons would poll.
type fleet struct {
	polls  atomic.Int64
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stores []snapshot.Store
}

func startFleet(ctx context.Context, env *scaleEnv, n int, interval time.Duration) (*fleet, error) {
	fctx, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel}
	if err := startEach(n, 8, func(i int) error { return f.startOne(fctx, env, i, interval) }); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

func (f *fleet) startOne(ctx context.Context, env *scaleEnv, i int, interval time.Duration) error {
	s, err := snapshot.Open(env.url, snapshot.OpenOptions{MaxConns: 1, ReadURL: env.readURL})
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.stores = append(f.stores, s)
	f.mu.Unlock()
	id := fmt.Sprintf("scale-%d", i)
	rec := reconcile.New(s, reconcile.Options{
		ReplicaID:      id,
		PollInterval:   interval,
		PollJitter:     0, // the default jitter, as daemons run
		ResyncInterval: -1,
		Materializers:  nopEngine(),
		OnPass: func(p reconcile.PassResult) {
			if !p.Relist {
				f.polls.Add(1)
			}
		},
	})
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		_ = rec.Run(ctx)
	}()
	go func() { // the daemon's keepalive heartbeat (nothing changes here), at a random phase: a fleet started over time
		defer f.wg.Done()
		start := time.Now()
		every := snapshot.HeartbeatInterval(interval)
		next := time.Duration(rand.Int64N(int64(every)))
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(next):
			}
			next = every
			st := rec.Status()
			_, _ = s.Heartbeat(ctx, snapshot.Heartbeat{ReplicaID: id, Host: "bench", PID: os.Getpid(), Version: "bench",
				StartedAt: start, Cursor: st.Cursor.String(), CursorSeq: st.Cursor.Seq, CursorAt: st.Cursor.At})
		}
	}()
	select {
	case <-rec.Synced():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
	for _, s := range f.stores {
		s.Close()
	}
}

// pingers run SELECT 1 on their own one-connection pools at the fleet's
// cadence (with the same jitter): the floor of a round trip's server cost.
type pingers struct {
	count  atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pools  []*pgxpool.Pool
}

func startPingers(ctx context.Context, url string, n int, interval time.Duration) (*pingers, error) {
	pctx, cancel := context.WithCancel(ctx)
	p := &pingers{cancel: cancel}
	for range n {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			p.stop()
			return nil, err
		}
		cfg.MaxConns = 1
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		pool, err := pgxpool.NewWithConfig(pctx, cfg)
		if err != nil {
			p.stop()
			return nil, err
		}
		p.pools = append(p.pools, pool)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				d := interval - time.Duration(rand.Int64N(int64(interval/10)))
				select {
				case <-pctx.Done():
					return
				case <-time.After(d):
				}
				var one int
				if err := pool.QueryRow(pctx, "SELECT 1").Scan(&one); err == nil {
					p.count.Add(1)
				}
			}
		}()
	}
	return p, nil
}

func (p *pingers) stop() {
	p.cancel()
	p.wg.Wait()
	for _, pool := range p.pools {
		pool.Close()
	}
}

// writeScale writes scale.md and scale.json.
func writeScale(cfg ScaleConfig, r *ScaleResult) error {
	if cfg.OutDir == "" {
		return nil
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "scale.json"), js, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("# Fleet scale: reconcilers polling one PostgreSQL\n\n")
	p("Produced by `%s`. Each mode runs on a private cluster the bench starts (PostgreSQL 15, fsync off); "+
		"the fleet runs in one process: every reconciler has its own store pool (one connection), polls every %s "+
		"with the default jitter, checks for stalls every fifth poll (a statement only when its poll's snapshot cannot answer: see postgres.Store.Stall) "+
		"and writes its keepalive heartbeat every %s (snapshot.HeartbeatInterval; at random phases, as a fleet started over time), as `reconciler run` does "+
		"(hints off: LISTEN cannot go through PgBouncer, nor to a standby). %d rows in the store; %s windows. "+
		"CPU is exact per process (/proc/PID/schedstat) over every process of the server, its idle background work included.\n\n",
		cfg.Command, cfg.Interval, snapshot.HeartbeatInterval(cfg.Interval), cfg.Rows, cfg.Window)
	p("Modes: **direct** (every reconciler connects to the primary); **pgbouncer** (Debian's PgBouncer 1.18, transaction pooling, " +
		"20 server connections; pgx in `default_query_exec_mode=exec`: the extended protocol without named prepared statements, " +
		"which PgBouncer 1.18 cannot keep across transactions); **standby** (`store.read_url` on a streaming hot standby: polls and " +
		"relists there; stall checks and heartbeats on the primary); **standby-pgbouncer** (the same, with a PgBouncer as above in front of each server: " +
		"what a large fleet runs).\n\n")
	p("| mode | reconcilers | primary CPU (%% of a core) | standby CPU | PgBouncer CPU | primary backends | polls/s | statements/s on the primary |\n|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		p("| %s | %d | %.2f%% | %s | %s | %d | %.0f | %.0f |\n", row.Mode, row.N, row.PrimaryCPU, pct(row.StandbyCPU, strings.HasPrefix(row.Mode, "standby")),
			pct(row.BouncerCPU, strings.HasSuffix(row.Mode, "pgbouncer")), row.Backends, row.PollsPerSec, row.StmtPerSec)
	}
	p("\nIdle baseline (nobody polling):")
	for _, m := range cfg.Modes {
		if v, ok := r.Baseline[m]; ok {
			p(" %s %.2f%%;", m, v)
		}
	}
	p("\n\n## Per idle poll, over SELECT 1 on the same connections\n\n")
	p("Server CPU (all processes, idle baseline subtracted) per poll of %d reconcilers, every statement amortized (the poll, the stall checks that need a statement, the heartbeats), "+
		"divided by the server CPU per `SELECT 1` of %d clients at the same cadence on the same connection mode, measured in the same run.\n\n", cfg.RatioN, cfg.RatioN)
	p("| mode | reconciler: µs per poll | SELECT 1: µs each | ratio |\n|---|---|---|---|\n")
	for _, x := range r.Ratios {
		p("| %s | %.0f | %.0f | %.2f× |\n", x.Mode, x.RecCPUPerPollUS, x.PingCPUPerPingUS, x.Ratio)
	}
	p("\n## Statements on the primary at the largest fleet\n\n")
	for _, m := range cfg.Modes {
		lines := r.Statements[m]
		if len(lines) == 0 {
			continue
		}
		p("**%s**\n\n| statement | calls/s | per poll | mean µs (execution) |\n|---|---|---|---|\n", m)
		for _, l := range lines {
			p("| `%s` | %.1f | %.2f | %.0f |\n", strings.ReplaceAll(l.Query, "|", "\\|"), l.PerSec, l.PerPollS, l.MeanUS)
		}
		p("\n")
	}
	for _, w := range r.Warnings {
		p("- warning: %s\n", w)
	}
	return os.WriteFile(filepath.Join(cfg.OutDir, "scale.md"), []byte(b.String()), 0o644)
}

func pct(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f%%", v)
}
