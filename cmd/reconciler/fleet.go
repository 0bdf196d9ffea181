package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/daemon"
	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func fleetCmd() *command {
	return &command{
		short: "List every replica from its heartbeat in the store.",
		name:  "fleet",
		usage: "[--store.url URL] [--all] [--change KEY [--kind K]] [--json]",
		summary: `List every replica's heartbeat from the store: heartbeat age, cursor lag
behind the store's head and counts per state, flagging stale replicas (no
heartbeat for 3 heartbeat intervals) and lagging ones (behind the head with a
cursor older than 2 heartbeat intervals). A replica writes its heartbeat when
what it reports changes and at least every max(5×poll.interval, 30s): give
the fleet's poll.interval. A replica id written by two live processes at once
is flagged DUPLICATE. Each replica's converged revision (the highest revision
every change up to which its replica serves) is shown beside the store's head
revision, with the lag in revisions and seconds (since the oldest change it
does not serve, on the store's clock). --change KEY says per replica whether
it serves that entry's current revision, and by when. Replicas stopped over
an hour ago, or silent for a day, are left out unless --all. Exits 0 even
when some are flagged.`,
		flags: func(fs *pflag.FlagSet) {
			configFlag(fs)
			config.AddFlags(fs, config.KeyStoreURL, config.KeyPollInterval)
			fs.Bool("all", false, "also list replicas stopped over an hour ago or silent for a day")
			fs.String("change", "", "an entry's key: whether and by when each replica serves its current revision")
			fs.String("kind", "", "the entry's kind for --change (credential, connector, datasource, engine; default: every kind with that key)")
			jsonFlag(fs)
		},
		run: runFleet,
	}
}

func runFleet(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	store, ctx, done, err := readStore(ctx, cfg, "read fleet")
	if err != nil {
		return err
	}
	defer done()
	head, err := store.Head(ctx)
	if err != nil {
		return fmt.Errorf("read store head: %w", err)
	}
	reps, err := store.Heartbeats(ctx)
	if err != nil {
		return fmt.Errorf("read heartbeats: %w", err)
	}
	view := buildFleet(head, reps, cfg.PollInterval, time.Now())
	if all, _ := fs.GetBool("all"); !all {
		view = view.Visible()
	}
	if key, _ := fs.GetString("change"); key != "" {
		kind, _ := fs.GetString("kind")
		return runFleetChange(ctx, c, fs, store, view, registry.Kind(kind), key)
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(c.stdout, view)
	}
	printFleet(c, view)
	return nil
}

func buildFleet(head snapshot.Watermark, reps []snapshot.Heartbeat, poll time.Duration, now time.Time) fleet.View {
	return fleet.Build(head, reps, snapshot.HeartbeatInterval(poll), now)
}

func printFleet(c *cli, v fleet.View) {
	fmt.Fprintf(c.stdout, "store head: journal seq %d, revision %d\n\n", v.Head.Seq, v.Head.Revision)
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprint(w, "REPLICA\tHOST\tPID\tVERSION\tHEARTBEAT\tCURSOR\tBEHIND\tCONVERGED\tLAG\t")
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
		lag := "0"
		if r.ConvergedBehind > 0 {
			lag = fmt.Sprintf("%d (%.0fs)", r.ConvergedBehind, r.ConvergedLagSeconds)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s ago\t%s\t%s\t%d\t%s\t", clean(r.ReplicaID), dash(r.Host), r.PID, dash(r.Version), age(now, r.HeartbeatAt),
			dash(r.Cursor), behind, r.ConvergedRevision, lag)
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
		if r.Duplicate {
			flags = append(flags, "DUPLICATE: "+daemon.DuplicateReplicaWarning(r.Clash, now.Sub(r.ClashAt)))
		}
		flags = append(flags, nodeFlags(r.Node, now)...)
		if r.LastError != "" {
			flags = append(flags, "error: "+r.LastError)
		}
		fmt.Fprintln(w, dash(strings.Join(flags, ", ")))
	}
	_ = w.Flush()
	if len(v.Replicas) == 0 && v.Hidden == 0 {
		fmt.Fprintln(c.stdout, "(no replicas have written a heartbeat)")
	}
	if v.Hidden > 0 {
		fmt.Fprintf(c.stdout, "(%d replicas stopped over %s ago or silent for %s not listed: --all lists them)\n", v.Hidden, fleet.GoneStopped, fleet.GoneSilent)
	}
}

// fleetChange is the answer of `reconciler fleet --change KEY --json`.
type fleetChange struct {
	Kind       registry.Kind        `json:"kind"`
	Key        string               `json:"key"`
	Revision   int64                `json:"revision"`    // the entry's current revision (0: no desired row)
	RevisionAt time.Time            `json:"revision_at"` // when it was written, by the store's clock
	Replicas   []fleetChangeReplica `json:"replicas"`
}

// fleetChangeReplica is one replica's answer for the change.
type fleetChangeReplica struct {
	ReplicaID         string    `json:"replica_id"`
	Served            bool      `json:"served"`             // its converged revision covers the change
	ServedBy          time.Time `json:"served_by,omitzero"` // the change was served at the latest then (store's clock)
	ConvergedRevision int64     `json:"converged_revision"`
}

// runFleetChange answers --change: the entry's current revision (from a
// read-only relist, keyed as the loop keys rows) and, per replica, whether
// its converged revision covers it.
func runFleetChange(ctx context.Context, c *cli, fs *pflag.FlagSet, store snapshot.Store, v fleet.View, kind registry.Kind, key string) error {
	rows, _, err := store.Relist(ctx)
	if err != nil {
		return fmt.Errorf("read rows: %w", err)
	}
	var found []fleetChange
	add := func(ref registry.Ref, rev int64, at time.Time) {
		if ref.Key == key && (kind == "" || ref.Kind == kind) {
			found = append(found, fleetChange{Kind: ref.Kind, Key: ref.Key, Revision: rev, RevisionAt: at})
		}
	}
	for i := range rows.Metadata {
		m := &rows.Metadata[i]
		if m.State == "active" {
			add(reconcile.MetadataRef(m), m.Revision, m.UpdatedAt)
		}
	}
	for _, cr := range rows.Credentials {
		add(registry.Ref{Kind: registry.KindCredential, Key: registry.CredentialKey(cr.Ref)}, cr.Revision, cr.UpdatedAt)
	}
	for _, s := range rows.Secrets {
		add(registry.Ref{Kind: registry.KindCredential, Key: registry.SecretKey(s.ID)}, s.Revision, s.UpdatedAt)
	}
	if len(found) == 0 {
		return fmt.Errorf("no desired row is the entry %q (a deleted row has no current revision)", key)
	}
	for i := range found {
		for _, r := range v.Replicas {
			ans := fleetChangeReplica{ReplicaID: r.ReplicaID, ConvergedRevision: r.ConvergedRevision, Served: r.ConvergedRevision >= found[i].Revision}
			if ans.Served {
				ans.ServedBy = r.ConvergedAt
			}
			found[i].Replicas = append(found[i].Replicas, ans)
		}
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		if len(found) == 1 {
			return printJSON(c.stdout, found[0])
		}
		return printJSON(c.stdout, found)
	}
	for _, f := range found {
		fmt.Fprintf(c.stdout, "%s %s: revision %d, written %s\n\n", f.Kind, clean(f.Key), f.Revision, f.RevisionAt.UTC().Format(time.RFC3339Nano))
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "REPLICA\tSERVED\tBY\tCONVERGED")
		for _, r := range f.Replicas {
			served, by := "no", "-"
			if r.Served {
				served = "yes"
				if !r.ServedBy.IsZero() {
					by = r.ServedBy.UTC().Format(time.RFC3339Nano)
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", clean(r.ReplicaID), served, by, r.ConvergedRevision)
		}
		_ = w.Flush()
		fmt.Fprintln(c.stdout)
	}
	return nil
}

// nodeFlags are the fleet table's flags of a replica's node: down, stale
// entries, no lanes applied, and its restart (planned, in flight, refused,
// the last one's result).
func nodeFlags(n snapshot.Node, now time.Time) []string {
	if !n.Reported {
		return nil
	}
	var out []string
	if !n.Ready {
		out = append(out, "NODE NOT READY")
	}
	if n.Stale > 0 {
		out = append(out, fmt.Sprintf("%d stale", n.Stale))
	}
	if n.Deaf {
		out = append(out, "NO LANES: the node applies no lane message")
	}
	r := n.Restart
	switch r.Phase {
	case registry.RestartInFlight:
		out = append(out, fmt.Sprintf("RESTARTING for %s", age(now, r.Since)))
	case registry.RestartPlanned, registry.RestartRefused, registry.RestartWouldRestart:
		out = append(out, "restart "+string(r.Phase)+": "+r.Reason)
	case registry.RestartOff:
		if n.Stale > 0 {
			out = append(out, "restarts off")
		}
	}
	if !r.LastAt.IsZero() && r.Phase != registry.RestartInFlight {
		last := fmt.Sprintf("restarted %s ago", age(now, r.LastAt))
		if r.LastResult != "" {
			last += " (" + string(r.LastResult) + ")"
		}
		out = append(out, last)
	}
	return out
}
