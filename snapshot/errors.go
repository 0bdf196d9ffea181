package snapshot

import "errors"

// Sentinel errors of a Store. Implementations map driver errors to these
// so that callers never see pgx or sqlite types.
var (
	// ErrCursorExpired: journal entries past the cursor were pruned.
	ErrCursorExpired = errors.New("cursor expired: journal pruned past it, relist needed")
	// ErrCursorRegressed: the store's watermark went backwards or the store
	// is another database (restored backup, new database).
	ErrCursorRegressed = errors.New("cursor regressed: store watermark went backwards, relist needed")
	// ErrUnavailable: the store cannot be reached; retry later.
	ErrUnavailable = errors.New("store unavailable")
	// ErrSchema: the schema is missing or older than this binary needs.
	ErrSchema = errors.New("store schema missing or outdated")
	// ErrNotStandby: the read URL is not a hot standby of the store (a
	// primary, a standby of another cluster, or another store).
	ErrNotStandby = errors.New("not a hot standby of the store")
	// ErrNotPlatform: a PostgreSQL database that holds other tables but
	// not the platform's sys_metadata: most likely not the nodes' database
	// (see postgres.Store.CheckPlatform).
	ErrNotPlatform = errors.New("not an ObjectStack database")
	// ErrBadURL: the store URL is malformed or of an unknown scheme.
	ErrBadURL = errors.New("bad store url")
)
