package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/daemon"
)

func runCmd() *command {
	return &command{
		short: "Run the daemon beside a replica.",
		name:  "run",
		usage: "[flags]",
		summary: `Run the daemon: keep this replica's registries converged with the store.

SQLite stores are migrated at start; PostgreSQL stores only with --migrate.
Signals: SIGHUP reloads the configuration file and reconciles now, SIGUSR1
runs a full resync, SIGUSR2 writes a drift report, SIGINT/SIGTERM stop
gracefully within 4s, whatever a materializer does (a second one exits at
once). Signals are caught from the start, also during startup.`,
		flags: func(fs *pflag.FlagSet) {
			configFlag(fs)
			fs.Bool("migrate", false, "migrate a PostgreSQL store at start (SQLite stores are always migrated)")
			config.AddFlags(fs)
		},
		run: runDaemon,
	}
}

// stopWatchdogSlack is how long past daemon.StopTimeout the process waits
// for the daemon before exiting regardless.
const stopWatchdogSlack = 500 * time.Millisecond

func runDaemon(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	migrate, _ := fs.GetBool("migrate")
	log, level := newLogger(cfg, c.stderr)
	c.sigs.log.Store(log)
	log.Debug("starting", slog.String("config", cfg.File))
	for _, u := range config.CheckEnv(os.Environ(), cfg) {
		log.Warn("environment variable names no configuration key: ignored",
			slog.String("variable", u.Name), slog.String("nearest", u.Nearest))
	}

	d := daemon.New(daemon.Options{
		Config:  cfg,
		Version: version,
		Migrate: migrate,
		Logger:  log,
		Level:   level,
		Reload:  func() (*config.Config, error) { return loadConfig(fs) },
	})
	// The daemon keeps its stop bound; should something it does not know
	// of hang, the watchdog still ends the process soon after.
	var watchdog atomic.Pointer[time.Timer]
	stopped := context.AfterFunc(ctx, func() {
		log.Info("stopping: finishing the pass in flight, abandoning what is still running after the stop bound",
			slog.String("signal", signalName(context.Cause(ctx))), slog.Duration("bound", daemon.StopTimeout))
		watchdog.Store(time.AfterFunc(daemon.StopTimeout+stopWatchdogSlack, func() {
			log.Error("stop bound passed with parts still running: exiting", slog.Duration("bound", daemon.StopTimeout))
			os.Exit(exitFailure)
		}))
	})
	defer func() {
		stopped()
		if t := watchdog.Load(); t != nil {
			t.Stop()
		}
	}()
	done := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		c.sigs.serve(d, log, done)
	}()
	defer func() {
		close(done)
		<-served
	}()
	return d.Run(ctx)
}

// signalName names the stop signal behind cause ("" for another cause).
func signalName(cause error) string {
	var s stopSignal
	if errors.As(cause, &s) {
		return s.sig.String()
	}
	return ""
}
