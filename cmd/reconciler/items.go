package main

import (
	"context"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/registry"
)

func itemsCmd() *command {
	return &command{
		short:   "List the running daemon's registry entries.",
		name:    "items",
		usage:   "[--kind KIND] [--state STATE] [--addr HOST:PORT] [--json]",
		summary: "List the running daemon's registry entries with state, revisions and reason.",
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			fs.String("kind", "", "only entries of this kind: credential, connector, datasource or engine")
			fs.String("state", "", "only entries in this state: pending, ready, degraded or held")
			jsonFlag(fs)
		},
		run: runItems,
	}
}

func runItems(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	kind, _ := fs.GetString("kind")
	state, _ := fs.GetString("state")
	q := url.Values{}
	if kind != "" {
		if _, err := registry.ParseKind(kind); err != nil {
			return usagef("--kind: %v", err)
		}
		q.Set("kind", kind)
	}
	if state != "" {
		if _, err := registry.ParseState(state); err != nil {
			return usagef("--state: %v", err)
		}
		q.Set("state", state)
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	path := "/v1/items"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var entries []itemRow
	var raw []byte
	if err := cl.do(ctx, "GET", path, &entries, &raw); err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		_, err := c.stdout.Write(raw)
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	withReplica := false
	for _, e := range entries {
		withReplica = withReplica || e.Replica != nil
	}
	if withReplica {
		fmt.Fprintln(w, "KIND\tKEY\tSTATE\tREVISION\tSERVING\tSINCE\tREPLICA\tREASON")
	} else {
		fmt.Fprintln(w, "KIND\tKEY\tSTATE\tREVISION\tSERVING\tSINCE\tREASON")
	}
	for _, e := range entries {
		serving := "-"
		if e.ServingRevision != 0 {
			serving = fmt.Sprint(e.ServingRevision)
		}
		if withReplica {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", clean(string(e.Kind)), clean(e.Key), clean(string(e.State)), e.Revision, serving, age(now, e.Since), e.replica(), e.reason())
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", clean(string(e.Kind)), clean(e.Key), clean(string(e.State)), e.Revision, serving, age(now, e.Since), dash(e.Reason))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintln(c.stdout, "(no entries)")
	}
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

// replica prints the replica state: "in-sync", "nudged×3", "stale:
// <remedy>".
func (e itemRow) replica() string {
	r := e.Replica
	switch {
	case r == nil:
		return "-"
	case r.State == registry.ReplicaNudged && r.Attempts > 0:
		return fmt.Sprintf("%s×%d", r.State, r.Attempts)
	case r.State == registry.ReplicaStale && r.Remedy != "":
		return clean(string(r.State) + ": " + r.Remedy)
	}
	return clean(string(r.State))
}
