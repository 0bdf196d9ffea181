package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// Store is what the daemon opens from store.url: the journal and rows the
// reconcile loop reads (reconcile.Source is the part it uses), the fleet's
// heartbeats, drift reports and guard records, and the schema. Its
// implementations are safe for concurrent use.
type Store interface {
	// Poll returns the addresses changed since cur (duplicates possible) and
	// the cursor to resume from. It returns ErrCursorExpired when entries
	// past cur were pruned and ErrCursorRegressed when the store went
	// backwards or is another store; the caller must Relist.
	Poll(ctx context.Context, cur Cursor) ([]Address, Cursor, error)
	// Read returns the current rows for the addresses (any table), whatever
	// their state; missing keys were deleted.
	Read(ctx context.Context, addrs []Address) (Rows, error)
	// Relist reads, in one consistent snapshot, every sys_metadata row in
	// state "active", every sys_secret row and every credential row, and
	// returns the cursor that resumes exactly after it.
	Relist(ctx context.Context) (Rows, Cursor, error)
	// Prune deletes journal entries older than retention, records the pruned
	// horizon and returns how many were deleted. Safe to call from every
	// sidecar: one at a time does the work.
	Prune(ctx context.Context, retention time.Duration) (int64, error)
	// Stall reports what cur cannot see yet, naming open writing
	// transactions older than minAge. On PostgreSQL a transaction is named
	// once an earlier poll or call, at least minAge before, saw its xid
	// below the snapshot's xmax (a later transaction had completed: any
	// write, the sidecars' heartbeats at least every 30s); with minAge 0,
	// at once. So a fleet's checks read the server's activity list only
	// while some write has been open that long, and a check with the
	// cursor of the store's latest poll sends no statement when that poll's
	// snapshot lists no such xid (with a standby: see postgres.Store.Stall).
	Stall(ctx context.Context, cur Cursor, minAge time.Duration) (Stall, error)
	// Head returns the store's current watermark.
	Head(ctx context.Context) (Watermark, error)

	// Heartbeat upserts this sidecar's row. It returns the other process
	// ("host pid N") whose heartbeat under the same replica id it replaced,
	// when that one wrote after hb.StartedAt and had not stopped: two live
	// processes share the id ("" when not).
	Heartbeat(ctx context.Context, hb Heartbeat) (clash string, err error)
	// Heartbeats lists every sidecar's heartbeat row.
	Heartbeats(ctx context.Context) ([]Heartbeat, error)
	// WriteDrift stores the latest drift report of a sidecar.
	WriteDrift(ctx context.Context, replicaID string, at time.Time, report json.RawMessage) error

	// SyncGuard makes a sidecar's pending guarded evictions exactly keep
	// (records already stored keep their release stamp, new ones are
	// stamped with the newest release) and returns them as stored.
	SyncGuard(ctx context.Context, replicaID string, keep []GuardRecord) ([]GuardRecord, error)
	// LoadGuard returns a sidecar's pending guarded evictions.
	LoadGuard(ctx context.Context, replicaID string) ([]GuardRecord, error)
	// Guards returns every sidecar's pending guarded evictions.
	Guards(ctx context.Context) ([]GuardRecord, error)
	// ReleaseGuard records a release of the fleet's guarded evictions (by
	// names who released); LatestRelease returns the newest (ID 0: none).
	ReleaseGuard(ctx context.Context, by string) (GuardRelease, error)
	LatestRelease(ctx context.Context) (GuardRelease, error)

	// Close releases the store's connections.
	Close()

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
