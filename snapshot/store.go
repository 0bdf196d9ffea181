package snapshot

import (
	"context"
	"fmt"
	"log/slog"
)

// Store is a Source that can also be migrated and checked: what the daemon
// opens from store.url.
type Store interface {
	Source
	CredentialOwners
	Leaser
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
	// MaxBodyBytes caps the metadata bodies a read returns: a longer body
	// is not read at all (nor sent by the server), only its length
	// (MetadataRow.Withheld), so one oversized row costs no memory. 0: no
	// cap.
	MaxBodyBytes int64
}

// selectBody fills a metadata select's body column (%[1]s) and withheld
// length (%[2]s): with a cap, a body longer than it is neither read nor
// sent, only its length in bytes (length is the store's expression for
// it).
func selectBody(query, length string, limit int64) string {
	if limit <= 0 {
		return fmt.Sprintf(query, "m.metadata", "0")
	}
	return fmt.Sprintf(query,
		fmt.Sprintf("CASE WHEN %s > %d THEN NULL ELSE m.metadata END", length, limit),
		fmt.Sprintf("CASE WHEN %s > %d THEN %s ELSE 0 END", length, limit, length))
}
