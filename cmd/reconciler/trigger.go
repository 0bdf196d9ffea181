package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/reconcile"
)

func triggerCmd() *command {
	return &command{
		short: "Ask the running daemon for a pass, resync or drift report.",
		name:  "trigger",
		usage: "[--resync | --drift] [--addr HOST:PORT] [--json]",
		summary: `Ask the running daemon for a pass now (like SIGHUP without the reload),
a full resync (--resync, like SIGUSR1) or a drift report written now
(--drift, like SIGUSR2; the report is printed).`,
		flags: func(fs *pflag.FlagSet) {
			clientFlags(fs)
			fs.Bool("resync", false, "ask for a full resync (relist) instead of a pass")
			fs.Bool("drift", false, "write a drift report now and print it")
			jsonFlag(fs)
		},
		run: runTrigger,
	}
}

func runTrigger(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	resync, _ := fs.GetBool("resync")
	drift, _ := fs.GetBool("drift")
	if resync && drift {
		return usagef("--resync and --drift exclude each other")
	}
	cl, err := newClient(fs)
	if err != nil {
		return err
	}
	asJSON, _ := fs.GetBool("json")
	var raw []byte
	switch {
	case drift:
		var rep reconcile.DriftReport
		if err := cl.do(ctx, "POST", "/v1/drift", &rep, &raw); err != nil {
			return err
		}
		if !asJSON {
			printDrift(c, rep)
			return nil
		}
	case resync:
		if err := cl.do(ctx, "POST", "/v1/resync", nil, &raw); err != nil {
			return err
		}
		if !asJSON {
			fmt.Fprintln(c.stdout, "full resync requested")
			return nil
		}
	default:
		if err := cl.do(ctx, "POST", "/v1/reconcile", nil, &raw); err != nil {
			return err
		}
		if !asJSON {
			fmt.Fprintln(c.stdout, "reconcile requested")
			return nil
		}
	}
	_, err = c.stdout.Write(raw)
	return err
}
