package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// PrepareStore checks that the store is reachable and its schema current:
// a store that AutoMigrates (SQLite) is migrated, others only when migrate
// is set. `reconciler migrate` and Run both use it; ctx bounds it.
func PrepareStore(ctx context.Context, store snapshot.Store, migrate bool, log *slog.Logger) error {
	if err := store.Ping(ctx); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	warnPlaintext(ctx, store, log)
	if store.AutoMigrates() || migrate {
		if err := store.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate store: %w", err)
		}
		log.DebugContext(ctx, "store schema is current", slog.String("store_kind", store.Kind()))
		return checkStandby(ctx, store)
	}
	if err := store.CheckSchema(ctx); err != nil {
		if errors.Is(err, snapshot.ErrSchema) {
			return fmt.Errorf("%w (run `reconciler migrate`, or start with --migrate)", err)
		}
		return fmt.Errorf("check store schema: %w", err)
	}
	return checkStandby(ctx, store)
}

// warnPlaintext warns once when the store's connection to a server that
// is not on this host is not encrypted (pgx's default sslmode=prefer
// falls back to plaintext without a word): its password and every row
// cross the network in clear.
func warnPlaintext(ctx context.Context, store snapshot.Store, log *slog.Logger) {
	e, ok := store.(snapshot.EncryptionReporter)
	if !ok {
		return
	}
	enc, local, err := e.Encrypted(ctx)
	if err == nil && !enc && !local {
		log.WarnContext(ctx, "the store connection is not encrypted: its password and rows cross the network in clear; set sslmode=verify-full in store.url")
	}
}

// CheckPlatform refuses a PostgreSQL database that has tables of its own
// but no sys_metadata (snapshot.ErrNotPlatform): migrating it would
// create the platform's tables where no node looks. Other stores pass.
func CheckPlatform(ctx context.Context, store snapshot.Store) error {
	c, ok := store.(snapshot.PlatformChecker)
	if !ok {
		return nil
	}
	if err := store.Ping(ctx); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	return c.CheckPlatform(ctx)
}

// checkStandby refuses a store.read_url that is not a hot standby of
// store.url (a primary, a standby of another cluster, another store).
func checkStandby(ctx context.Context, store snapshot.Store) error {
	c, ok := store.(snapshot.StandbyChecker)
	if !ok {
		return nil
	}
	// A schema just migrated may not be replayed there yet: wait for it
	// (within ctx, the startup bound).
	for {
		err := c.CheckStandby(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, snapshot.ErrSchema) || !backoff.Wait(ctx, 200*time.Millisecond) {
			return fmt.Errorf("%s: %w", config.KeyStoreReadURL, err)
		}
	}
}
