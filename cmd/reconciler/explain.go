package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

func explainCmd() *command {
	return &command{
		short: "Explain one entry of the running daemon: why it is in its state.",
		name:  "explain",
		usage: "[--kind KIND] KEY [--addr HOST:PORT] [--json]",
		summary: `Explain one entry of the running daemon: its state and reason, its row,
its references and how each resolved (organization, org-less, code object,
or missing), the entries referring to it, its replica state, the next
retry, a remedy, and its last transitions (the first is its creation).

Without --kind every entry under KEY is shown (a key with "/" is an engine
key: object/account). --kind also takes an engine type (object, view, …):
"--kind object account" is the engine entry object/account. Exits 0
whatever the entry's state.`,
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			fs.String("kind", "", "the entry's kind (credential, connector, datasource, engine) or an engine type (object, view, …)")
			jsonFlag(fs)
		},
		run: runExplain,
	}
}

// entryAddress reads KEY and --kind as explain and retry take them: the
// kind ("" for every kind) and the key.
func entryAddress(c *cli, fs *pflag.FlagSet) (registry.Kind, string, error) {
	if len(c.args) != 1 {
		return "", "", usagef("want one KEY (got %d arguments)", len(c.args))
	}
	key := c.args[0]
	if key == "" {
		return "", "", usagef("KEY is empty")
	}
	k, _ := fs.GetString("kind")
	kind, typ, err := kindFlag(k)
	if err != nil {
		return "", "", err
	}
	if typ != "" && !strings.Contains(key, "/") {
		key = registry.Escape(typ) + "/" + key
	}
	if kind == "" && strings.Contains(key, "/") {
		kind = registry.KindEngine // only engine keys have a "/"
	}
	return kind, key, nil
}

// kindFlag maps --kind: a registry kind, or an engine type (kind engine,
// typ set), or a usage error saying which words it takes.
func kindFlag(s string) (kind registry.Kind, typ string, err error) {
	if s == "" {
		return "", "", nil
	}
	if k, err := registry.ParseKind(s); err == nil {
		return k, "", nil
	}
	if metadata.IsType(s) {
		return registry.KindEngine, s, nil // an engine type: object, view, hook, …
	}
	return "", "", usagef("--kind: unknown kind %q: want credential, connector, datasource, engine, or a metadata type (%s)", s, strings.Join(metadata.Types, ", "))
}

// explained is GET /v1/item as the CLI reads it.
type explained struct {
	reconcile.Explanation
	Replica *registry.ReplicaStatus `json:"replica"`
}

func runExplain(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	kind, key, err := entryAddress(c, fs)
	if err != nil {
		return err
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	q := url.Values{"key": {key}}
	if kind != "" {
		q.Set("kind", string(kind))
	}
	var raw []byte
	if err := cl.do(ctx, "GET", "/v1/item?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		_, err := c.stdout.Write(raw)
		return err
	}
	var xs []explained
	if kind != "" {
		var x explained
		if err := json.Unmarshal(raw, &x); err != nil {
			return fmt.Errorf("decode answer of /v1/item: %w", err)
		}
		xs = append(xs, x)
	} else if err := json.Unmarshal(raw, &xs); err != nil {
		return fmt.Errorf("decode answer of /v1/item: %w", err)
	}
	now := time.Now()
	for i, x := range xs {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		printExplained(c.stdout, now, x)
	}
	return nil
}

// printExplained prints one explanation for people.
func printExplained(out io.Writer, now time.Time, x explained) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "%s %s\n", clean(string(x.Kind)), clean(x.Key))
	serving := "-"
	if x.ServingRevision != 0 {
		serving = fmt.Sprint(x.ServingRevision)
	}
	fmt.Fprintf(w, "  state\t%s for %s (revision %d, serving %s)\n", clean(string(x.State)), age(now, x.Since), x.Revision, serving)
	if x.Reason != "" {
		fmt.Fprintf(w, "  reason\t%s\n", clean(x.Reason))
	}
	if x.Remedy != "" {
		fmt.Fprintf(w, "  remedy\t%s\n", clean(x.Remedy))
	}
	if !x.NextRetry.IsZero() {
		fmt.Fprintf(w, "  next retry\tin %s (attempt %d)\n", age(x.NextRetry, now), x.Attempts+1)
	}
	if r := x.Row; r != nil {
		desc := fmt.Sprintf("%s id %s, revision %d", clean(string(r.Table)), clean(r.ID), r.Revision)
		if r.State != "" {
			desc += ", " + clean(r.State)
		}
		if r.Withheld > 0 {
			desc += fmt.Sprintf(", body withheld (%d bytes, above the read cap)", r.Withheld)
		}
		if r.Gone {
			desc += ", gone from the store"
		}
		for _, b := range r.Beside {
			desc += fmt.Sprintf("; beside it: %s (%s, revision %d)", clean(b.ID), clean(b.State), b.Revision)
		}
		fmt.Fprintf(w, "  row\t%s\n", desc)
		if r.Fault != "" {
			fmt.Fprintf(w, "  fault\t%s\n", clean(r.Fault))
		}
	}
	if x.Replica != nil {
		fmt.Fprintf(w, "  replica\t%s\n", describeReplica(x.Replica, now))
	}
	if err := w.Flush(); err != nil {
		return
	}
	fmt.Fprintf(out, "  references (%d)\n", len(x.References))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, r := range x.References {
		what := string(r.Kind)
		if r.Type != "" {
			what = r.Type
		}
		how := r.Resolved
		if r.Key != "" {
			how += " → " + clean(string(r.Kind)) + " " + clean(r.Key)
			if r.State != "" {
				how += " (" + clean(string(r.State)) + ")"
			}
		}
		if r.Candidates > 1 {
			how += fmt.Sprintf(", %d rows answer", r.Candidates)
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\n", clean(what), clean(r.Name), how)
	}
	_ = w.Flush()
	fmt.Fprintf(out, "  dependents (%d)\n", len(x.Dependents))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, d := range x.Dependents {
		fmt.Fprintf(w, "    %s\t%s\t%s\n", clean(string(d.Kind)), clean(d.Key), dash(string(d.State)))
	}
	_ = w.Flush()
	fmt.Fprintf(out, "  history (%d)\n", len(x.History))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, h := range x.History {
		fmt.Fprintf(w, "    %s\t%s\trev %d\t%s\n", h.At.Local().Format("2006-01-02 15:04:05"), clean(string(h.State)), h.Revision, dash(h.Reason))
	}
	_ = w.Flush()
}

// describeReplica prints an entry's replica state for explain.
func describeReplica(r *registry.ReplicaStatus, now time.Time) string {
	s := clean(string(r.State))
	if !r.Since.IsZero() {
		s += " for " + age(now, r.Since)
	}
	if r.Attempts > 0 {
		s += fmt.Sprintf(", %d messages published", r.Attempts)
	}
	if r.Error != "" {
		s += "; last error: " + clean(r.Error)
	}
	if r.Remedy != "" {
		s += "; remedy: " + clean(r.Remedy)
	}
	if !r.LastMessage.IsZero() {
		s += "; last message " + age(now, r.LastMessage) + " ago"
	}
	if !r.LastProbe.IsZero() {
		s += "; last probe " + age(now, r.LastProbe) + " ago: " + clean(r.Probe)
	}
	return s
}
