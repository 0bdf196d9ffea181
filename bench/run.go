package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Results is everything one run measured, rendered by the report.
type Results struct {
	Config   Config
	Machine  Machine
	Started  time.Time
	Took     time.Duration
	Idle     []idleResult
	Change   []changeResult
	Cold     []coldResult
	Fleet    []fleetResult
	PGSS     bool     // pg_stat_statements was available
	Warnings []string // what was skipped and why
}

// Machine describes where the run happened.
type Machine struct {
	CPU, Kernel, Go, Postgres, Load string
	Cores                           int
	MemGB                           float64
}

func machine(ctx context.Context, admin string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %f kB", &kb)
		m.MemGB = kb / (1 << 20)
	}
	if c, err := pgx.Connect(ctx, admin); err == nil {
		_ = c.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres)
		c.Close(ctx)
	}
	return m
}

// Run measures everything cfg asks for and writes the report to
// cfg.OutDir.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	logf := func(format string, args ...any) { log.InfoContext(ctx, fmt.Sprintf(format, args...)) }
	r := &Results{Config: cfg, Started: time.Now(), Machine: machine(ctx, cfg.AdminURL)}
	sizes := cfg.Sizes
	fleetDone := len(cfg.FleetSizes) == 0
	runFleet := func(db *benchDB, ss *pgss) error {
		f, err := measureFleet(ctx, cfg, db, ss, logf)
		if err != nil {
			r.Warnings = append(r.Warnings, "fleet: "+err.Error())
			logf("fleet skipped: %v", err)
			return nil
		}
		r.Fleet = f
		return nil
	}
	for _, n := range sizes {
		name := "reconciler_bench_" + sizeName(n)
		t0 := time.Now()
		db, err := createDB(ctx, cfg.AdminURL, strings.ToLower(name), n)
		if err != nil {
			return err
		}
		logf("seeded %s: %d rows in %v", db.name, n, time.Since(t0).Round(time.Millisecond))
		if err := measureSize(ctx, cfg, r, db, logf, func(ss *pgss) error {
			if !fleetDone && n == cfg.FleetRows {
				fleetDone = true
				return runFleet(db, ss)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := dropDB(ctx, cfg.AdminURL, db.name); err != nil {
			logf("drop %s: %v", db.name, err)
		}
	}
	if !fleetDone {
		db, err := createDB(ctx, cfg.AdminURL, "reconciler_bench_fleet", cfg.FleetRows)
		if err != nil {
			return err
		}
		ss, err := openPGSS(ctx, db)
		if err != nil {
			return err
		}
		err = runFleet(db, ss)
		ss.close()
		_ = dropDB(ctx, cfg.AdminURL, db.name)
		if err != nil {
			return err
		}
	}
	r.Took = time.Since(r.Started)
	return writeReport(cfg.OutDir, r)
}

func measureSize(ctx context.Context, cfg Config, r *Results, db *benchDB, logf func(string, ...any), extra func(*pgss) error) error {
	ss, err := openPGSS(ctx, db)
	if err != nil {
		return err
	}
	defer ss.close()
	r.PGSS = ss.ok
	if !ss.ok {
		r.Warnings = appendOnce(r.Warnings, "pg_stat_statements is not in shared_preload_libraries: server time and statement rates are not measured (run through scripts/with-postgres.sh)")
	}
	idle, err := measureIdle(ctx, cfg, db, ss, logf)
	if err != nil {
		return err
	}
	ch, err := measureChange(ctx, cfg, db, ss, logf)
	if err != nil {
		return err
	}
	idle.Reconciler.ClientCPU = ch.IdleCPU
	r.Idle = append(r.Idle, idle)
	if ch.RedisErr != "" {
		r.Warnings = appendOnce(r.Warnings, "push lane skipped: "+ch.RedisErr)
	}
	r.Change = append(r.Change, ch)
	if db.rows <= cfg.ColdMaxRows {
		runs := cfg.Runs
		if db.rows >= 1_000_000 {
			runs = 1
		}
		cold, err := measureCold(ctx, cfg, db, runs, logf)
		if err != nil {
			return err
		}
		r.Cold = append(r.Cold, cold)
	}
	return extra(ss)
}

func appendOnce(xs []string, s string) []string {
	for _, x := range xs {
		if x == s {
			return xs
		}
	}
	return append(xs, s)
}
