package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/daemon/statusapi"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func statusCmd() *command {
	return &command{
		short:   "Show the running daemon's status.",
		name:    "status",
		usage:   "[--addr HOST:PORT] [--json]",
		summary: "Show the running daemon's status: sync, cursor and lag, last pass, counts per kind and state.",
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			jsonFlag(fs)
		},
		run: runStatus,
	}
}

func runStatus(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	var st statusapi.StatusBody
	asJSON, _ := fs.GetBool("json")
	if printed, err := cl.answer(ctx, c.stdout, asJSON, "GET", "/v1/status", &st); err != nil || printed {
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "replica\t%s\n", clean(st.Status.ReplicaID))
	fmt.Fprintf(w, "version\t%s\n", dash(st.Version))
	fmt.Fprintf(w, "store\t%s (up: %s)\n", dash(st.Store), yesNo(st.StoreUp))
	fmt.Fprintf(w, "started\t%s ago\n", age(now, st.StartedAt))
	fmt.Fprintf(w, "synced\t%s\n", yesNo(st.Synced))
	fmt.Fprintf(w, "cursor\t%s (lag %.1fs)\n", clean(st.Cursor.String()), st.LagSeconds)
	fmt.Fprintf(w, "passes\t%d\n", st.Passes)
	if p := st.LastPass; p != nil {
		fmt.Fprintf(w, "last pass\t%s, %s ago, took %s, %d changes\n", clean(string(p.Cause)), age(now, p.At), p.Duration.Round(time.Microsecond), len(p.Changes))
	}
	fmt.Fprintf(w, "last error\t%s\n", dash(st.LastError))
	for _, warn := range st.Warnings {
		fmt.Fprintf(w, "WARNING\t%s\n", clean(warn))
	}
	if r := st.ReplicaSync; r != nil {
		bus := "up"
		if !r.BusUp {
			bus = "DOWN"
		}
		driving := ""
		if !r.Driving {
			driving = ", NOT DRIVEN"
		}
		fmt.Fprintf(w, "replica\treachable %s, bus %s%s, %d restarts seen\n", yesNo(r.Reachable), bus, driving, r.Restarts)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "replica failing\t%s\n", clean(e))
		}
		last := "-"
		if r.LastError != "" {
			last = clean(r.LastError) + " (" + age(now, r.LastErrorAt) + " ago)"
		}
		fmt.Fprintf(w, "replica last error\t%s\n", last)
		var counts []string
		for _, s := range registry.ReplicaStates {
			if n := r.Counts[s]; n > 0 {
				counts = append(counts, fmt.Sprintf("%s %d", s, n))
			}
		}
		fmt.Fprintf(w, "replica states\t%s\n", dash(strings.Join(counts, ", ")))
		printRestart(w, r.Restart, now)
	}
	fmt.Fprintf(w, "pending\t%d journal entries not visible yet\n", st.Stall.Pending)
	if sb := st.Stall.Standby; sb != nil {
		fmt.Fprintf(w, "standby\t%s\n", standbyLine(sb))
	}
	for _, b := range st.Stall.Blockers {
		fmt.Fprintf(w, "blocked by\tpid %d, transaction open %s (%s)\n", b.PID, b.XactAge.Round(time.Second), clean(b.State))
	}
	fmt.Fprintf(w, "guard\t%s\n", guardLine(st.Guard))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprint(w, "KIND\t")
	for _, s := range registry.States {
		fmt.Fprintf(w, "%s\t", upper(string(s)))
	}
	fmt.Fprintln(w)
	for _, k := range registry.Kinds {
		fmt.Fprintf(w, "%s\t", k)
		for _, s := range registry.States {
			fmt.Fprintf(w, "%d\t", st.Counts[k][s])
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// standbyLine describes the standby that polls read.
func standbyLine(sb *snapshot.Standby) string {
	switch {
	case sb.Error != "":
		return "unreachable: " + clean(sb.Error)
	case sb.Promoted:
		return "promoted (no longer in recovery)"
	}
	line := fmt.Sprintf("replay lag %s, %d bytes behind the primary", sb.ReplayLag.Round(time.Millisecond), sb.ReplayLagBytes)
	if sb.ReplayPaused {
		line += " (replay paused)"
	}
	return line
}

// printRestart prints the restart part of the replica section: a replica
// that applies no lane message, the restart (planned, in flight, done,
// refused and why) and the last one.
func printRestart(w io.Writer, r *registry.ReplicaRestart, now time.Time) {
	if r == nil {
		return
	}
	if r.NoLanes != "" {
		fmt.Fprintf(w, "WARNING\t%s\n", clean(r.NoLanes))
	}
	line := string(r.Phase)
	switch {
	case r.Shadow:
		line += " (shadow mode)"
	case !r.Enabled:
		line += " (replica.restart.command not set)"
	}
	if !r.Since.IsZero() {
		line += fmt.Sprintf(" for %s", age(now, r.Since))
	}
	if r.Reason != "" {
		line += ": " + r.Reason
	}
	fmt.Fprintf(w, "restart\t%s\n", clean(line))
	if !r.LastAt.IsZero() {
		last := fmt.Sprintf("%s ago (%d in all)", age(now, r.LastAt), r.Count)
		if r.LastResult != "" {
			last += ", " + string(r.LastResult)
			if r.LastReason != "" {
				last += ": " + r.LastReason
			}
		}
		fmt.Fprintf(w, "last restart\t%s\n", clean(last))
	}
}

// guardLine summarizes the eviction guard for status.
func guardLine(g reconcile.GuardStatus) string {
	if g.Held == 0 {
		return fmt.Sprintf("nothing held (guard.max_evictions %s within %s)", clean(g.Limit), clean(g.Window))
	}
	return fmt.Sprintf("HOLDING %d evictions: %s (see `reconciler guard`)", g.Held, clean(g.Reason))
}
