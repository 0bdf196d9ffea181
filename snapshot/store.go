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
	// Kind names the store's backend (Backend.Kind): "postgres",
	// "sqlite".
	Kind() string
	// AutoMigrates reports whether the daemon migrates the store at every
	// start (a store of its own, such as a SQLite file) rather than only
	// when asked (`reconciler migrate`, --migrate: a shared server).
	AutoMigrates() bool
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
	// MaxTotalBytes caps the bodies one read returns in all: past it, in id
	// order, bodies are withheld (MetadataRow.Withheld < 0) for the caller
	// to read again, so a relist or a read of many large rows holds at most
	// this much of them at once. 0: no cap.
	MaxTotalBytes int64
}

// Log returns the Logger, or one that discards when it is nil.
func (o OpenOptions) Log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// SelectBody fills a metadata select's body column (%[1]s) and withheld
// length (%[2]s): with a cap, a body longer than it is neither read nor
// sent, only its length in bytes (length is the store's expression for
// it). With a total, bodies are sent in id order only while their running
// sum stays within it; the later ones are withheld with their length
// negated (MetadataRow.Withheld < 0: read them again), so that no read
// holds more than total bytes of bodies at once.
func SelectBody(query, length string, limit, total int64) string {
	if limit <= 0 && total <= 0 {
		return fmt.Sprintf(query, "m.metadata", "0")
	}
	within := "1 = 1"
	if limit > 0 {
		within = fmt.Sprintf("%s <= %d", length, limit)
	}
	keep := within
	if total > 0 {
		keep = fmt.Sprintf("%s AND sum(CASE WHEN %s THEN %s ELSE 0 END) OVER (ORDER BY m.id ROWS UNBOUNDED PRECEDING) <= %d",
			within, within, length, total)
	}
	return fmt.Sprintf(query,
		fmt.Sprintf("CASE WHEN %s THEN m.metadata ELSE NULL END", keep),
		fmt.Sprintf("CASE WHEN m.metadata IS NULL OR %s THEN 0 WHEN %s THEN -%s ELSE %s END", keep, within, length, length))
}
