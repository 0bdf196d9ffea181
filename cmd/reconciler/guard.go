package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/daemon/statusapi"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func guardCmd() *command {
	return &command{
		short: "Show the eviction guard; `guard release` applies what it holds.",
		name:  "guard",
		usage: "[release] [--addr HOST:PORT | --store.url URL] [--json]",
		summary: `Show the evictions the eviction guard holds back: rows that went in a mass
deletion (more than guard.max_evictions of one kind within guard.window),
whose entries keep serving, marked guarded. Without --store.url it asks the
running daemon at --addr; with it, it lists every replica's pending guard
from the store.

'guard release --store.url URL' releases them for the fleet: a release record
in the store that every sidecar applies within a poll, covering the evictions
guarded up to that moment (later mass evictions are guarded again).
'guard release' without --store.url releases the daemon at --addr only.`,
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			config.AddFlags(fs, config.KeyStoreURL)
			jsonFlag(fs)
		},
		run: runGuard,
	}
}

func runGuard(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	release := false
	switch {
	case len(c.args) == 1 && c.args[0] == "release":
		release = true
	case len(c.args) > 0:
		return usagef("unexpected argument %q (want release, or nothing)", c.args[0])
	}
	asJSON, _ := fs.GetBool("json")
	if fs.Changed(config.KeyStoreURL) {
		return guardStore(ctx, c, fs, release, asJSON)
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	if release {
		var rel statusapi.Released
		if printed, err := cl.answer(ctx, c.stdout, asJSON, "POST", "/v1/guard/release", &rel); err != nil || printed {
			return err
		}
		fmt.Fprintf(c.stdout, "released %d guarded evictions of this sidecar only; they apply at its next pass\n(to release the fleet: reconciler guard release --store.url URL)\n", rel.Held)
		return nil
	}
	var g reconcile.GuardStatus
	if printed, err := cl.answer(ctx, c.stdout, asJSON, "GET", "/v1/guard", &g); err != nil || printed {
		return err
	}
	printGuard(c, g)
	return nil
}

// printGuard prints a sidecar's guard for people.
func printGuard(c *cli, g reconcile.GuardStatus) {
	if g.Held == 0 {
		fmt.Fprintf(c.stdout, "eviction guard: nothing held (guard.max_evictions %s within %s)\n", clean(g.Limit), clean(g.Window))
		return
	}
	now := time.Now()
	var kinds []string
	for k, n := range g.Kinds {
		if n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(c.stdout, "eviction guard: HOLDING %d evictions (%s) for %s; the entries keep serving\n", g.Held, strings.Join(kinds, ", "), age(now, g.Since))
	fmt.Fprintf(c.stdout, "reason: %s\n", dash(g.Reason))
	if g.Unsaved {
		fmt.Fprintln(c.stdout, "not yet written to the store (retried every pass)")
	}
	fmt.Fprintln(c.stdout, "rows that come back clear their entries; `reconciler guard release --store.url URL` applies them for the fleet")
	fmt.Fprintln(c.stdout)
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tKEY\tSERVING\tGUARDED FOR")
	for _, k := range g.Keys {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", clean(string(k.Kind)), clean(k.Key), k.Revision, age(now, k.Since))
	}
	_ = w.Flush()
	if g.Truncated {
		fmt.Fprintf(c.stdout, "… %d more\n", g.Held-len(g.Keys))
	}
}

// guardStore shows or releases the fleet's guard in the store.
func guardStore(ctx context.Context, c *cli, fs *pflag.FlagSet, release, asJSON bool) error {
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	store, ctx, done, err := readStore(ctx, cfg, "read the guard")
	if err != nil {
		return err
	}
	defer done()
	pending, err := store.Guards(ctx)
	if err != nil {
		return err
	}
	if release {
		rel, err := store.ReleaseGuard(ctx, releasedBy())
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(c.stdout, struct {
				Release snapshot.GuardRelease `json:"release"`
				Covers  int                   `json:"covers"`
			}{rel, len(pending)})
		}
		fmt.Fprintf(c.stdout, "release %d recorded at %s: every sidecar applies the %d evictions it guarded before it within a poll\n",
			rel.ID, rel.At.Format(time.RFC3339), len(pending))
		return nil
	}
	latest, err := store.LatestRelease(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.stdout, struct {
			Pending       []snapshot.GuardRecord `json:"pending"`
			LatestRelease snapshot.GuardRelease  `json:"latest_release"`
		}{pending, latest})
	}
	if len(pending) == 0 {
		fmt.Fprintln(c.stdout, "no replica holds a guarded eviction")
	} else {
		byReplica := map[string]int{}
		for _, p := range pending {
			byReplica[p.ReplicaID]++
		}
		fmt.Fprintf(c.stdout, "%d guarded evictions pending on %d replicas\n\n", len(pending), len(byReplica))
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "REPLICA\tKIND\tKEY\tSERVING\tGUARDED FOR")
		now := time.Now()
		for _, p := range pending {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", clean(p.ReplicaID), clean(p.Kind), clean(p.Key), p.Revision, age(now, p.GuardedAt))
		}
		_ = w.Flush()
	}
	if latest.ID > 0 {
		fmt.Fprintf(c.stdout, "latest release: %d at %s by %s\n", latest.ID, latest.At.Format(time.RFC3339), dash(latest.By))
	}
	return nil
}

// releasedBy names who released: user@host.
func releasedBy() string {
	host, _ := os.Hostname()
	user := os.Getenv("USER")
	if user == "" {
		user = "unknown"
	}
	return user + "@" + host
}
