package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/pflag"
)

func versionCmd() *command {
	return &command{
		short:   "Print the version.",
		name:    "version",
		usage:   "[--json]",
		summary: "Print the version of this binary.",
		flags:   jsonFlag,
		run: func(_ context.Context, c *cli, fs *pflag.FlagSet) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return printJSON(c.stdout, map[string]string{"version": version, "go": runtime.Version()})
			}
			_, err := fmt.Fprintf(c.stdout, "reconciler %s (%s)\n", version, runtime.Version())
			return err
		},
	}
}
