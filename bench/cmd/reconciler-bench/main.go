// Command reconciler-bench runs the benchmark suite of package bench
// against the PostgreSQL named by RECONCILER_TEST_DATABASE_URL and writes
// bench/results.md and its charts. scripts/bench.sh (make bench) runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/bench"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "reconciler-bench:", err)
		os.Exit(2)
	}
	if cfg.RenderOnly {
		if err := bench.Render(cfg.OutDir); err != nil {
			fmt.Fprintln(os.Stderr, "reconciler-bench:", err)
			os.Exit(1)
		}
		return
	}
	bench.Main("reconciler-bench", func(ctx context.Context) error { return bench.Run(ctx, cfg, log) })
}

func parseFlags(args []string) (bench.Config, error) {
	fs := flag.NewFlagSet("reconciler-bench", flag.ContinueOnError)
	var cfg bench.Config
	sizes := fs.String("sizes", "1k,10k,100k,1M", "row counts to measure, comma separated (k, M suffixes)")
	fleet := fs.String("fleet", "1,10,50", "fleet sizes: reconcilers polling one database")
	fs.IntVar(&cfg.Runs, "runs", 3, "repeated windows/runs per figure (the report shows medians)")
	fs.StringVar(&cfg.OutDir, "out", "bench", "directory for results.md and the PNG charts")
	fs.StringVar(&cfg.Redis, "redis", "127.0.0.1:6379", "Redis host:port for the push-lane comparison (skipped when unreachable)")
	fs.StringVar(&cfg.Command, "command", "make bench", "the command that reproduces this run, quoted in the report")
	fs.DurationVar(&cfg.IdleInterval, "idle.interval", 20*time.Millisecond, "poll interval while measuring idle cost")
	fs.DurationVar(&cfg.IdleWindow, "idle.window", 2*time.Second, "one idle measuring window")
	fs.DurationVar(&cfg.ChangeInterval, "change.interval", 100*time.Millisecond, "poll.interval of the change-latency runs")
	fs.IntVar(&cfg.Changes, "changes", 100, "changes timed per mode and size")
	fs.IntVar(&cfg.DropChanges, "drop.changes", 1000, "changes of the lost-message comparison")
	fs.Float64Var(&cfg.DropRate, "drop.rate", 0.01, "fraction of push messages lost")
	fs.Uint64Var(&cfg.Seed, "seed", 6, "RNG seed")
	fs.IntVar(&cfg.FleetRows, "fleet.rows", 10_000, "rows of the fleet database (reuses that size's database when it is in -sizes)")
	fs.DurationVar(&cfg.FleetInterval, "fleet.interval", time.Second, "poll interval of the fleet")
	fs.DurationVar(&cfg.FleetWindow, "fleet.window", 15*time.Second, "one fleet measuring window")
	fs.BoolVar(&cfg.RenderOnly, "render", false, "only render results.md and the charts again from -out/results.json")
	coldMax := fs.String("cold.max", "1M", "largest size whose cold start is measured")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.AdminURL = os.Getenv("RECONCILER_TEST_DATABASE_URL")
	if cfg.AdminURL == "" && !cfg.RenderOnly {
		return cfg, fmt.Errorf("RECONCILER_TEST_DATABASE_URL is not set: run through scripts/with-postgres.sh (make bench) or point it at a PostgreSQL admin URL")
	}
	var err error
	if cfg.Sizes, err = bench.ParseSizes(*sizes); err != nil {
		return cfg, err
	}
	cm, err := bench.ParseSizes(*coldMax)
	if err != nil {
		return cfg, err
	}
	cfg.ColdMaxRows = cm[0]
	for f := range strings.SplitSeq(*fleet, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			return cfg, fmt.Errorf("bad fleet size %q", f)
		}
		cfg.FleetSizes = append(cfg.FleetSizes, n)
	}
	if cfg.Runs < 1 {
		return cfg, fmt.Errorf("-runs must be ≥ 1")
	}
	return cfg, nil
}
