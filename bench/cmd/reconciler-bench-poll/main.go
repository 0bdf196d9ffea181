// Command reconciler-bench-poll measures the server CPU of one idle poll
// over a `SELECT 1` (package bench, RunPollCost): pgbench, one client per
// statement, prepared statements and the simple protocol, alternated
// rounds, on a private cluster it starts. It writes poll.md and poll.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := bench.RunPollCost(ctx, cfg, log); err != nil {
		fmt.Fprintln(os.Stderr, "reconciler-bench-poll:", err)
		os.Exit(1)
	}
}
