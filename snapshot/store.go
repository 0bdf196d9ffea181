package snapshot

import (
	"context"
	"log/slog"
)

// Store is a Source that can also be migrated and checked: what the daemon
// opens from store.url.
type Store interface {
	Source
	// Migrate creates or upgrades the schema idempotently.
	Migrate(ctx context.Context) error
	// CheckSchema returns an error wrapping ErrSchema when the schema is
	// missing or older than this binary needs.
	CheckSchema(ctx context.Context) error
	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
	// Kind is "postgres" or "sqlite".
	Kind() string
}

// OpenOptions tune Open.
type OpenOptions struct {
	Logger   *slog.Logger // default discards
	MaxConns int32        // PostgreSQL pool size (each pool); default 4
	// ReadURL is a hot standby of the PostgreSQL store: polls, relists and
	// reads go there, everything else to the store's URL. Empty: none.
	ReadURL string
}
