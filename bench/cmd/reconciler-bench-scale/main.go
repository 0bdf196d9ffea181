// Command reconciler-bench-scale measures fleets of reconcilers polling one
// PostgreSQL (package bench, RunScale): directly, through PgBouncer in
// transaction mode and reading a hot standby (store.read_url), and the
// server CPU of one idle poll over SELECT 1's. It starts its own clusters
// and PgBouncer, and writes scale.md and scale.json.
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
	fs := flag.NewFlagSet("reconciler-bench-scale", flag.ExitOnError)
	var cfg bench.ScaleConfig
	sizes := fs.String("sizes", "1,10,100,1000", "reconcilers polling at once")
	modes := fs.String("modes", "direct,pgbouncer,standby,standby-pgbouncer", "direct, pgbouncer, standby, standby-pgbouncer")
	fs.DurationVar(&cfg.Interval, "interval", time.Second, "the reconcilers' poll.interval")
	fs.DurationVar(&cfg.Window, "window", 15*time.Second, "one measuring window")
	fs.IntVar(&cfg.Rows, "rows", 1000, "rows in the store")
	fs.IntVar(&cfg.RatioN, "ratio", 100, "reconcilers (and SELECT 1 clients) of the per-poll ratio")
	fs.IntVar(&cfg.StandbyMax, "standby-max", 100, "largest fleet of mode standby (a direct connection per reconciler on each server); 0: every size")
	fs.StringVar(&cfg.OutDir, "out", "bench", "directory for scale.md and scale.json")
	fs.StringVar(&cfg.Command, "command", "make bench", "how this run was started, for the report")
	_ = fs.Parse(os.Args[1:])
	for f := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "reconciler-bench-scale: -sizes: %q is not a count\n", f)
			os.Exit(2)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	for m := range strings.SplitSeq(*modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Modes = append(cfg.Modes, m)
		}
	}
	bench.Main("reconciler-bench-scale", func(ctx context.Context) error {
		_, err := bench.RunScale(ctx, cfg, log)
		return err
	})
}
