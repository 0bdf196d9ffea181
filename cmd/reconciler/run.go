package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/daemon"
	"github.com/objectstack-fleet/reconciler/internal/config"
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
gracefully (a second one exits at once).`,
		flags: func(fs *pflag.FlagSet) {
			configFlag(fs)
			fs.Bool("migrate", false, "migrate a PostgreSQL store at start (SQLite stores are always migrated)")
			config.AddFlags(fs)
		},
		run: runDaemon,
	}
}

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

	// Signals are caught before anything starts so that none is lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	d := daemon.New(daemon.Options{
		Config:  cfg,
		Version: version,
		Migrate: migrate,
		Logger:  log,
		Level:   level,
		Reload:  func() (*config.Config, error) { return loadConfig(fs) },
	})
	done := make(chan struct{})
	defer close(done)
	go handleSignals(sigs, done, d, stop, log)
	return d.Run(ctx)
}

// handleSignals maps signals to the daemon until done is closed. Each
// request is non-blocking and coalescing, so a burst costs one action.
func handleSignals(sigs <-chan os.Signal, done <-chan struct{}, d *daemon.Daemon, stop func(), log *slog.Logger) {
	stopping := false
	for {
		var s os.Signal
		select {
		case <-done:
			return
		case s = <-sigs:
		}
		switch s {
		case syscall.SIGHUP:
			log.Info("SIGHUP: reloading the configuration and reconciling")
			d.Reload()
		case syscall.SIGUSR1:
			log.Info("SIGUSR1: full resync requested")
			d.Resync()
		case syscall.SIGUSR2:
			log.Info("SIGUSR2: drift report requested")
			d.DriftNow()
		default: // SIGINT, SIGTERM
			if stopping {
				log.Warn("second stop signal: exiting now", slog.String("signal", s.String()))
				os.Exit(exitFailure)
			}
			stopping = true
			log.Info("stopping: finishing the pass in flight", slog.String("signal", s.String()))
			stop()
		}
	}
}
