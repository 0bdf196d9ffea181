package main

import (
	"context"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

func itemsCmd() *command {
	return &command{
		short: "List the running daemon's registry entries.",
		name:  "items",
		usage: "[--kind KIND] [--state STATE] [--org ORG] [--type TYPE] [--package PKG] [--replica STATE] [--limit N] [--after KIND/KEY] [--root-causes] [--addr HOST:PORT] [--json]",
		summary: `List the running daemon's registry entries with state, revisions and reason
(the reason last, never cut). --kind also takes an engine type (object,
view, …) and --state a replica state (in-sync, nudged, stale, …). --org,
--type and --package select by the key's parts ("-": entries without
one). --limit pages; the next page starts --after the last one shown.
--root-causes collapses the held entries onto what holds them (missing
references, held credentials).`,
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			fs.String("kind", "", "only entries of this kind (credential, connector, datasource, engine) or engine type (object, view, …)")
			fs.String("state", "", "only entries in this state (pending, ready, degraded, held) or replica state (in-sync, nudged, stale, …)")
			fs.String("org", "", `only entries of this organization ("-": of none)`)
			fs.String("type", "", "only engine entries of this metadata type")
			fs.String("package", "", `only entries of this package ("-": of none)`)
			fs.String("replica", "", "only entries in this replica state")
			fs.Int("limit", 0, "at most this many entries (0: all)")
			fs.String("after", "", "start after this entry (KIND/KEY, as the previous page ended)")
			fs.Bool("root-causes", false, "collapse held entries onto what holds them")
			jsonFlag(fs)
		},
		run: runItems,
	}
}

// itemsQuery maps the flags of items to the query of /v1/items.
func itemsQuery(fs *pflag.FlagSet) (url.Values, error) {
	q := url.Values{}
	kind, _ := fs.GetString("kind")
	k, typ, err := kindFlag(kind)
	if err != nil {
		return nil, err
	}
	if k != "" {
		q.Set("kind", string(k))
	}
	if t, _ := fs.GetString("type"); t != "" {
		if typ != "" && t != typ {
			return nil, usagef("--kind %s and --type %s disagree", typ, t)
		}
		typ = t
	}
	if typ != "" {
		q.Set("type", typ)
	}
	if state, _ := fs.GetString("state"); state != "" {
		if _, err := registry.ParseState(state); err == nil {
			q.Set("state", state)
		} else if _, rerr := registry.ParseReplicaState(state); rerr == nil {
			q.Set("replica", state) // pending is the registry's: --replica pending for the replica's
		} else {
			return nil, usagef("--state: %q is neither a state (pending, ready, degraded, held) nor a replica state: %v", state, rerr)
		}
	}
	if r, _ := fs.GetString("replica"); r != "" {
		if q.Has("replica") && q.Get("replica") != r {
			return nil, usagef("--state %s and --replica %s disagree", q.Get("replica"), r)
		}
		q.Set("replica", r)
	}
	for _, name := range []string{"org", "package", "after"} {
		if v, _ := fs.GetString(name); v != "" {
			q.Set(name, v)
		}
	}
	if n, _ := fs.GetInt("limit"); n < 0 {
		return nil, usagef("--limit: want 0 (all) or more, got %d", n)
	} else if n > 0 {
		q.Set("limit", fmt.Sprint(n))
	}
	return q, nil
}

func runItems(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	q, err := itemsQuery(fs)
	if err != nil {
		return err
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	asJSON, _ := fs.GetBool("json")
	if rc, _ := fs.GetBool("root-causes"); rc {
		return printRootCauses(ctx, c, cl, asJSON)
	}
	path := "/v1/items"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var entries []itemRow
	if printed, err := cl.answer(ctx, c.stdout, asJSON, "GET", path, &entries); err != nil || printed {
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	withReplica := false
	for _, e := range entries {
		withReplica = withReplica || e.Replica != nil
	}
	// Narrow columns first, the reason last and whole: a 100-column
	// screen shows a row of usual keys and the start of its reason.
	if withReplica {
		fmt.Fprintln(w, "KIND\tKEY\tSTATE\tREV\tSINCE\tREPLICA\tREASON")
	} else {
		fmt.Fprintln(w, "KIND\tKEY\tSTATE\tREV\tSINCE\tREASON")
	}
	for _, e := range entries {
		if withReplica {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(string(e.Kind)), clean(e.Key), e.state(), e.revisions(), age(now, e.Since), e.replica(), e.reason())
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(string(e.Kind)), clean(e.Key), e.state(), e.revisions(), age(now, e.Since), dash(e.Reason))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintln(c.stdout, "(no entries)")
	} else if n, _ := fs.GetInt("limit"); n > 0 && len(entries) == n {
		last := entries[len(entries)-1]
		fmt.Fprintf(c.stdout, "(more: --after %s)\n", clean(string(last.Kind)+"/"+last.Key))
	}
	return nil
}

// revisions prints the desired revision, and the serving one when it
// differs: "7", "7/6", "7/-" (none serves).
func (e itemRow) revisions() string {
	switch e.ServingRevision {
	case e.Revision:
		return fmt.Sprint(e.Revision)
	case 0:
		return fmt.Sprintf("%d/-", e.Revision)
	}
	return fmt.Sprintf("%d/%d", e.Revision, e.ServingRevision)
}

// printRootCauses prints the held entries collapsed onto their causes.
func printRootCauses(ctx context.Context, c *cli, cl *client, asJSON bool) error {
	var causes []reconcile.RootCause
	if printed, err := cl.answer(ctx, c.stdout, asJSON, "GET", "/v1/items?root_causes=true", &causes); err != nil || printed {
		return err
	}
	if len(causes) == 0 {
		fmt.Fprintln(c.stdout, "(nothing held)")
		return nil
	}
	held := map[string]bool{}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "HELD\tCAUSE\tREASON")
	for _, rc := range causes {
		for _, h := range rc.Held {
			held[h] = true
		}
		fmt.Fprintf(w, "%d\t%s\t%s\n", len(rc.Held), clean(rc.Cause), dash(rc.Reason))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "(%d held entries onto %d causes; `reconciler explain KEY` shows one)\n", len(held), len(causes))
	return nil
}

// itemRow is one entry of /v1/items with its replica state, if any.
type itemRow struct {
	registry.Entry
	Replica *registry.ReplicaStatus `json:"replica"`
}

// reason prints the entry's reason and, for an entry the replica does not
// serve (nudged, unservable, not driven), the replica's error: the
// failure an operator has to see without --json.
func (e itemRow) reason() string {
	r := e.Replica
	if r == nil || r.Error == "" {
		return dash(e.Reason)
	}
	switch r.State {
	case registry.ReplicaNudged, registry.ReplicaUnservable, registry.ReplicaWouldPublish:
		if e.Reason != "" {
			return clean(e.Reason + "; replica: " + r.Error)
		}
		return clean("replica: " + r.Error)
	}
	return dash(e.Reason)
}

// replica prints the replica state, briefly: "in-sync", "nudged×3",
// "stale" (explain names the remedy).
func (e itemRow) replica() string {
	r := e.Replica
	switch {
	case r == nil:
		return "-"
	case r.State == registry.ReplicaNudged && r.Attempts > 0:
		return fmt.Sprintf("%s×%d", r.State, r.Attempts)
	}
	return clean(string(r.State))
}

// state prints the entry's state, marking an entry the eviction guard
// keeps ("ready/guarded": its row is gone, it still serves).
func (e itemRow) state() string {
	if e.Guarded {
		return clean(string(e.State)) + "/guarded"
	}
	return clean(string(e.State))
}
