package main

import (
	"context"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/daemon/statusapi"
)

func retryCmd() *command {
	return &command{
		short: "Have the running daemon materialize entries now (held ones included).",
		name:  "retry",
		usage: "[--kind KIND] KEY | --held [--addr HOST:PORT] [--json]",
		summary: `Have the running daemon materialize an entry now, whatever its state:
a held entry waits for a change of its rows, so a fix made outside them (a
token re-enabled upstream, an allowlist fixed) needs a retry. --held
retries every held entry. The retry is a pass of the daemon's loop (never
beside another materialization of the same entry); the command waits for
it and prints the entries as they are after it. Exits 0 whatever their
state. KEY and --kind as for explain.`,
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			fs.String("kind", "", "the entry's kind (credential, connector, datasource, engine) or an engine type (object, view, …)")
			fs.Bool("held", false, "retry every held entry")
			jsonFlag(fs)
		},
		run: runRetry,
	}
}

func runRetry(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	held, _ := fs.GetBool("held")
	q := url.Values{}
	if held {
		if len(c.args) > 0 {
			return usagef("--held takes no KEY")
		}
		q.Set("held", "true")
	} else {
		kind, key, err := entryAddress(c, fs)
		if err != nil {
			return err
		}
		q.Set("key", key)
		if kind != "" {
			q.Set("kind", string(kind))
		}
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	cl.http.Timeout = retryClientTimeout
	var body statusapi.RetryBody
	asJSON, _ := fs.GetBool("json")
	if printed, err := cl.answer(ctx, c.stdout, asJSON, "POST", "/v1/item/retry?"+q.Encode(), &body); err != nil || printed {
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tKEY\tSTATE\tSINCE\tREASON")
	for _, e := range body.Retried {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", clean(string(e.Kind)), clean(e.Key), clean(string(e.State)), age(now, e.Since), dash(e.Reason))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case body.Pending:
		fmt.Fprintln(c.stdout, "(the retry is still waiting for the daemon's loop: it will happen; `reconciler explain` shows the outcome)")
	case len(body.Retried) == 0:
		fmt.Fprintln(c.stdout, "(nothing to retry)")
	}
	return nil
}

// retryClientTimeout bounds retry's request: longer than the daemon waits
// for its loop before it answers that the retry is pending.
const retryClientTimeout = 90 * time.Second
