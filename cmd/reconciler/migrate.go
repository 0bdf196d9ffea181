package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/daemon"
	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func migrateCmd() *command {
	return &command{
		short: "Create or upgrade the store schema.",
		name:  "migrate",
		usage: "[flags]",
		summary: `Create or upgrade the store's schema (idempotent).

Works on PostgreSQL and SQLite; safe to run again and from several hosts.
A PostgreSQL database that holds other tables but no sys_metadata is most
likely not the nodes' database: migrate refuses it, naming it, unless
--create-platform-tables (an empty database is migrated as it is).`,
		flags: func(fs *pflag.FlagSet) {
			configFlag(fs)
			fs.Bool("create-platform-tables", false, "create the platform's sys_metadata and sys_secret in a PostgreSQL database that has other tables but not them")
			config.AddFlags(fs, config.KeyStoreURL, config.KeyLogLevel, config.KeyLogFormat)
		},
		run: runMigrate,
	}
}

func runMigrate(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	log, _ := newLogger(cfg, c.stderr)
	store, err := snapshot.Open(cfg.StoreURL, snapshot.OpenOptions{Logger: log})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if create, _ := fs.GetBool("create-platform-tables"); !create {
		if err := daemon.CheckPlatform(ctx, store); err != nil {
			return err
		}
	}
	if err := daemon.PrepareStore(ctx, store, true, log); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "migrated %s store %s\n", store.Kind(), redact.URL(cfg.StoreURL))
	return nil
}
