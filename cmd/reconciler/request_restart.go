package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
)

func requestRestartCmd() *command {
	return &command{
		short: "Write a restart request file (a restart command for a container).",
		name:  "request-restart",
		usage: "FILE",
		summary: `Write FILE (its content the time of the request), atomically, and exit.
As replica.restart.command in a Kubernetes pod, it restarts the replica
container without cluster-wide rights: the replica container's exec
livenessProbe fails (and removes FILE) while FILE exists in an emptyDir
both containers mount, so the kubelet restarts that container. The image
has no shell or touch; this is the one thing the command needs.`,
		run: runRequestRestart,
	}
}

func runRequestRestart(_ context.Context, c *cli, _ *pflag.FlagSet) error {
	if len(c.args) != 1 || c.args[0] == "" {
		return usagef("want one argument: the request file")
	}
	file := c.args[0]
	if err := writeAtomic(file, []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
		return fmt.Errorf("request restart: write %s: %w", file, err)
	}
	return nil
}

// writeAtomic writes data to file through a temporary file beside it, so
// that a reader never sees part of it.
func writeAtomic(file string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return errors.Unwrap(err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
