// Command reconciler is the sidecar that keeps a replica's registries
// converged with the shared store, and the CLI that shows what it is doing.
// See `reconciler help` and the README.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/buildinfo"
)

// versionOverride, when set at build time (-ldflags "-X
// main.versionOverride=..."), replaces the version read from the build
// information (see internal/buildinfo).
var versionOverride string

// version is the version this binary reports (heartbeats, status, logs).
var version = buildinfo.Read(versionOverride).Version

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitFound: the command ran and found something to look at (drift).
	exitFound = 3
)

// errFound is returned by a command that ran and found something to look
// at, having printed it: exit code 3, no message.
var errFound = errors.New("found something to look at")

// command is one subcommand; each lives in a file of its own.
type command struct {
	name    string
	short   string // one line for the command list
	summary string // the help text
	usage   string // the argument synopsis after the name
	hidden  bool
	flags   func(fs *pflag.FlagSet)
	run     func(ctx context.Context, cli *cli, fs *pflag.FlagSet) error
}

// cli is what every command may use.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	args           []string // positional arguments after flags
	sigs           *signals // caught since the start of main
}

func commands() []*command {
	return []*command{runCmd(), migrateCmd(), statusCmd(), itemsCmd(), explainCmd(), retryCmd(), driftCmd(), fleetCmd(), guardCmd(), validateCmd(), triggerCmd(), checksumCmd(), requestRestartCmd(), versionCmd()}
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func main() {
	sigs := catchSignals() // first: no signal may find the default action
	ctx := sigs.stopContext(context.Background(), os.Stderr)
	os.Exit(runMain(ctx, sigs, os.Args[1:], os.Stdout, os.Stderr))
}

// runMain dispatches to the subcommand and maps its error to an exit code.
// The first SIGINT or SIGTERM ends ctx.
func runMain(ctx context.Context, sigs *signals, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				printHelp(newFlagSet(c, stdout), c)
				return exitOK
			}
		}
		printUsage(stdout)
		return exitOK
	case "--version", "-v":
		name = "version"
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "reconciler: unknown command %q\n\n", name)
		printUsage(stderr)
		return exitUsage
	}
	fs := newFlagSet(c, stderr)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(stdout)
			printHelp(fs, c)
			return exitOK
		}
		fmt.Fprintf(stderr, "reconciler %s: %v\nRun 'reconciler %s --help' for usage.\n", c.name, err, c.name)
		return exitUsage
	}
	if c.name != "run" {
		sigs.forClient()
	}
	err := c.run(ctx, &cli{stdin: os.Stdin, stdout: stdout, stderr: stderr, args: fs.Args(), sigs: sigs}, fs)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errFound):
		return exitFound
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "reconciler %s: %v\nRun 'reconciler %s --help' for usage.\n", c.name, err, c.name)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "reconciler %s: %v\n", c.name, err)
		return exitFailure
	}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func newFlagSet(c *command, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("reconciler "+c.name, pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.SortFlags = false
	if c.flags != nil {
		c.flags(fs)
	}
	fs.Usage = func() {} // errors say how to get help; --help prints it
	return fs
}

func printHelp(fs *pflag.FlagSet, c *command) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: reconciler %s %s\n\n%s\n\nFlags:\n", c.name, c.usage, c.summary)
	fmt.Fprint(w, fs.FlagUsages())
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `reconciler keeps a replica's registries converged with the shared store.

Usage: reconciler <command> [flags]

Commands:
`)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-9s %s\n", c.name, c.short)
		}
	}
	fmt.Fprint(w, `
Run 'reconciler <command> --help' for a command's flags.
Exit codes: 0 ok, 1 failure, 2 usage, 3 something to look at (drift found).
`)
}

// noArgs rejects positional arguments.
func noArgs(c *cli) error {
	if len(c.args) > 0 {
		return usagef("unexpected argument %q", c.args[0])
	}
	return nil
}
