package main

import (
	"context"
	"fmt"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// storeTimeout bounds a command's reads of the store (fleet, guard,
// checksum --row).
const storeTimeout = 30 * time.Second

// readStore opens cfg's store for a command that reads it and returns it
// with a context bounded by storeTimeout; done closes both. what names the
// read in a schema error ("read fleet"). A store whose schema is not
// current is refused: these commands never migrate.
func readStore(ctx context.Context, cfg *config.Config, what string) (snapshot.Store, context.Context, func(), error) {
	store, err := snapshot.Open(cfg.StoreURL, snapshot.OpenOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open store: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	done := func() { cancel(); store.Close() }
	if err := store.CheckSchema(ctx); err != nil {
		done()
		return nil, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return store, ctx, done, nil
}
