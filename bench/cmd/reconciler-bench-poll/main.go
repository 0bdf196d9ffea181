// Command reconciler-bench-poll measures the server CPU of one idle poll
// over a `SELECT 1` (package bench, RunPollCost): pgbench, one client per
// statement, prepared statements and the simple protocol, alternated
// rounds, on a private cluster it starts. It writes poll.md and poll.json.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/objectstack-fleet/reconciler/bench"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fs := flag.NewFlagSet("reconciler-bench-poll", flag.ExitOnError)
	var cfg bench.PollCostConfig
	fs.IntVar(&cfg.Entries, "entries", 10_000, "journal entries (one transaction each)")
	fs.IntVar(&cfg.Transactions, "transactions", 20_000, "pgbench transactions per run")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "alternated rounds (medians)")
	fs.StringVar(&cfg.OutDir, "out", "bench", "directory for poll.md and poll.json")
	fs.StringVar(&cfg.Command, "command", "make bench", "how this run was started, for the report")
	_ = fs.Parse(os.Args[1:])
	bench.Main("reconciler-bench-poll", func(ctx context.Context) error {
		_, err := bench.RunPollCost(ctx, cfg, log)
		return err
	})
}
