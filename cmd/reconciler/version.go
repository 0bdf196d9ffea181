package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/buildinfo"
)

func versionCmd() *command {
	return &command{
		short: "Print the version.",
		name:  "version",
		usage: "[--json]",
		summary: `Print the version of this binary: the release version (the commit's tag,
else a pseudo-version), the commit, whether the tree was dirty, and the Go
toolchain, all from the binary's build information.`,
		flags: jsonFlag,
		run: func(_ context.Context, c *cli, fs *pflag.FlagSet) error {
			if err := noArgs(c); err != nil {
				return err
			}
			info := buildinfo.Read(versionOverride)
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return printJSON(c.stdout, info)
			}
			_, err := fmt.Fprintf(c.stdout, "reconciler %s\n", info)
			return err
		},
	}
}
