package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

func driftCmd() *command {
	return &command{
		short: "Print the running daemon's drift report.",
		name:  "drift",
		usage: "[--addr HOST:PORT] [--json]",
		summary: `Print the running daemon's current drift report: what differs between the
desired rows and its registries, and the entries its replica does not
serve as the rows say (nudged, stale, unservable: with the replica's error
and the remedy). Exits 3 when there is anything (the entries not ready, the
replica drift, open transactions holding changes back), 0 when clean, 1
when it could not ask the daemon.`,
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			jsonFlag(fs)
		},
		run: runDrift,
	}
}

func runDrift(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	var rep reconcile.DriftReport
	asJSON, _ := fs.GetBool("json")
	printed, err := cl.answer(ctx, c.stdout, asJSON, "GET", "/v1/drift", &rep)
	if err != nil {
		return err
	}
	if !printed {
		printDrift(c, rep)
	}
	if !rep.Clean() {
		return errFound
	}
	return nil
}

func printDrift(c *cli, rep reconcile.DriftReport) {
	s := rep.Summary
	verdict := "clean"
	if !rep.Clean() {
		verdict = "DRIFT"
	}
	fmt.Fprintf(c.stdout, "replica %s at %s: %s\n", clean(rep.ReplicaID), rep.At.Format(time.RFC3339), verdict)
	fmt.Fprintf(c.stdout, "cursor %s (lag %.1fs), %d journal entries pending\n", clean(rep.Cursor), rep.LagSeconds, rep.Stall.Pending)
	fmt.Fprintf(c.stdout, "desired %d, ready %d, not ready %d, signature mismatch %d, orphans %d, missing %d, checksum mismatches %d, guarded %d\n",
		s.Desired, s.Ready, s.NotReady, s.SignatureMismatch, s.Orphans, s.Missing, s.ChecksumMismatches, s.Guarded)
	now := time.Now()
	sections := []struct {
		name  string
		items []reconcile.DriftItem
	}{
		{"not ready", rep.NotReady}, {"signature mismatch", rep.SignatureMismatch}, {"orphans", rep.Orphans},
		{"missing", rep.Missing}, {"checksum mismatches", rep.ChecksumMismatches},
		{"guarded evictions (rows gone, still serving: `reconciler guard`)", rep.Guarded},
	}
	for _, sec := range sections {
		if len(sec.items) == 0 {
			continue
		}
		fmt.Fprintf(c.stdout, "\n%s:\n", sec.name)
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  KIND\tKEY\tSTATE\tREVISION\tSERVING\tSINCE\tREASON")
		for _, it := range sec.items {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%d\t%d\t%s\t%s\n", clean(string(it.Kind)), clean(it.Key), dash(string(it.State)), it.Revision, it.ServingRevision, age(now, it.Since), dash(it.Reason))
		}
		_ = w.Flush()
	}
	for _, b := range rep.Stall.Blockers {
		fmt.Fprintf(c.stdout, "blocked by pid %d: transaction open %s (%s)\n", b.PID, b.XactAge.Round(time.Second), clean(b.State))
	}
	printReplicaDrift(c, rep.ReplicaSync, now)
}

// printReplicaDrift lists what the replica does not serve as the rows
// say, and the replica's failures.
func printReplicaDrift(c *cli, r *registry.ReplicaReport, now time.Time) {
	if r == nil {
		return
	}
	for _, e := range r.Errors {
		fmt.Fprintf(c.stdout, "replica failing: %s\n", clean(e))
	}
	if len(r.Lagging) == 0 {
		return
	}
	fmt.Fprintf(c.stdout, "\nreplica does not serve (%d):\n", len(r.Lagging))
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  KIND\tKEY\tREPLICA\tSINCE\tERROR\tREMEDY")
	for _, it := range r.Lagging {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", clean(string(it.Kind)), clean(it.Key), clean(string(it.State)), age(now, it.Since), dash(it.Error), dash(it.Remedy))
	}
	_ = w.Flush()
}
