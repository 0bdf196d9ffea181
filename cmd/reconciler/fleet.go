package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/daemon"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func fleetCmd() *command {
	return &command{
		short: "List every replica from its heartbeat in the store.",
		name:  "fleet",
		usage: "[--store.url URL] [--json]",
		summary: `List every replica's heartbeat from the store: heartbeat age, cursor lag
behind the store's head and counts per state, flagging stale replicas (no
heartbeat for 3×poll.interval×5) and lagging ones (behind the head with a
cursor older than 2×poll.interval×5). Exits 0 even when some are flagged.`,
		flags: func(fs *pflag.FlagSet) {
			configFlag(fs)
			config.AddFlags(fs, config.KeyStoreURL, config.KeyPollInterval)
			jsonFlag(fs)
		},
		run: runFleet,
	}
}

// fleetRow is one replica in `reconciler fleet --json`.
type fleetRow struct {
	snapshot.Replica
	HeartbeatAgeSeconds float64          `json:"heartbeat_age_seconds"`
	BehindEntries       int64            `json:"behind_entries"`
	LagSeconds          float64          `json:"lag_seconds"`
	States              map[string]int64 `json:"states"`
	Stale               bool             `json:"stale"`
	Lagging             bool             `json:"lagging"`
}

// fleetView is the whole answer of `reconciler fleet --json`.
type fleetView struct {
	Head     snapshot.Watermark `json:"head"`
	Replicas []fleetRow         `json:"replicas"`
}

func runFleet(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	store, err := snapshot.Open(cfg.StoreURL, snapshot.OpenOptions{})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := store.CheckSchema(ctx); err != nil {
		return fmt.Errorf("read fleet: %w", err)
	}
	head, err := store.Head(ctx)
	if err != nil {
		return fmt.Errorf("read store head: %w", err)
	}
	reps, err := store.Replicas(ctx)
	if err != nil {
		return fmt.Errorf("read heartbeats: %w", err)
	}
	view := buildFleet(head, reps, cfg.PollInterval, time.Now())
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(c.stdout, view)
	}
	printFleet(c, view)
	return nil
}

func buildFleet(head snapshot.Watermark, reps []snapshot.Replica, poll time.Duration, now time.Time) fleetView {
	beat := daemon.HeartbeatInterval(poll)
	view := fleetView{Head: head, Replicas: make([]fleetRow, 0, len(reps))}
	for _, r := range reps {
		row := fleetRow{Replica: r, States: map[string]int64{}}
		row.HeartbeatAgeSeconds = max(now.Sub(r.HeartbeatAt), 0).Seconds()
		row.BehindEntries = max(head.Seq-r.CursorSeq, 0)
		if row.BehindEntries > 0 && !r.CursorAt.IsZero() {
			row.LagSeconds = max(now.Sub(r.CursorAt), 0).Seconds()
		}
		for k, n := range r.Counts {
			_, state, ok := strings.Cut(k, "/")
			if !ok {
				state = k
			}
			row.States[state] += n
		}
		if !r.Stopped {
			row.Stale = now.Sub(r.HeartbeatAt) > 3*beat
			row.Lagging = row.BehindEntries > 0 && row.LagSeconds > (2*beat).Seconds()
		}
		view.Replicas = append(view.Replicas, row)
	}
	sort.Slice(view.Replicas, func(i, j int) bool { return view.Replicas[i].ReplicaID < view.Replicas[j].ReplicaID })
	return view
}

func printFleet(c *cli, v fleetView) {
	fmt.Fprintf(c.stdout, "store head: journal seq %d\n\n", v.Head.Seq)
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprint(w, "REPLICA\tHOST\tPID\tVERSION\tHEARTBEAT\tCURSOR\tBEHIND\t")
	for _, s := range registry.States {
		fmt.Fprintf(w, "%s\t", upper(string(s)))
	}
	fmt.Fprintln(w, "FLAGS")
	now := time.Now()
	for _, r := range v.Replicas {
		behind := "0"
		if r.BehindEntries > 0 {
			behind = fmt.Sprintf("%d (%.0fs)", r.BehindEntries, r.LagSeconds)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s ago\t%s\t%s\t", clean(r.ReplicaID), dash(r.Host), r.PID, dash(r.Version), age(now, r.HeartbeatAt), dash(r.Cursor), behind)
		for _, s := range registry.States {
			fmt.Fprintf(w, "%d\t", r.States[string(s)])
		}
		var flags []string
		if r.Stopped {
			flags = append(flags, "stopped")
		}
		if r.Stale {
			flags = append(flags, "STALE")
		}
		if r.Lagging {
			flags = append(flags, "LAGGING")
		}
		if r.LastError != "" {
			flags = append(flags, "error: "+r.LastError)
		}
		fmt.Fprintln(w, dash(strings.Join(flags, ", ")))
	}
	_ = w.Flush()
	if len(v.Replicas) == 0 {
		fmt.Fprintln(c.stdout, "(no replicas have written a heartbeat)")
	}
}
