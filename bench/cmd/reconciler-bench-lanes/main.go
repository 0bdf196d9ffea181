// Command reconciler-bench-lanes measures the lane path (package bench,
// RunLanes): commit → replica serving through the platform's push lane
// alone and through the reconciler over a lossy bus, and lane messages per
// change across fleets of sidecars. It uses the PostgreSQL named by
// RECONCILER_TEST_DATABASE_URL and starts its own redis-server.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/bench"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fs := flag.NewFlagSet("reconciler-bench-lanes", flag.ExitOnError)
	var cfg bench.LanesConfig
	fs.IntVar(&cfg.Objects, "objects", 200, "object rows seeded")
	fs.IntVar(&cfg.Changes, "changes", 200, "changes timed per path")
	fs.Float64Var(&cfg.Loss, "loss", 0.01, "fraction of PUBLISH commands lost on the bus")
	fs.DurationVar(&cfg.Interval, "interval", 100*time.Millisecond, "the reconciler's poll.interval")
	fleets := fs.String("fleet", "2,10", "sidecar counts for messages per change")
	fs.IntVar(&cfg.FleetN, "fleet.changes", 50, "changes per fleet size")
	fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "a change not served within this counts as never served")
	fs.StringVar(&cfg.OutDir, "out", "bench", "directory for lanes.md and lanes.json")
	fs.Uint64Var(&cfg.Seed, "seed", 6, "RNG seed")
	_ = fs.Parse(os.Args[1:])
	cfg.AdminURL = os.Getenv("RECONCILER_TEST_DATABASE_URL")
	if cfg.AdminURL == "" {
		fmt.Fprintln(os.Stderr, "reconciler-bench-lanes: RECONCILER_TEST_DATABASE_URL is not set: run through scripts/with-postgres.sh (make bench)")
		os.Exit(2)
	}
	for f := range strings.SplitSeq(*fleets, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "reconciler-bench-lanes: -fleet: %q is not a sidecar count\n", f)
			os.Exit(2)
		}
		cfg.Fleets = append(cfg.Fleets, n)
	}
	bench.Main("reconciler-bench-lanes", func(ctx context.Context) error { return bench.RunLanes(ctx, cfg, log) })
}
