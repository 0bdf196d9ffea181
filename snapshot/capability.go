package snapshot

import "context"

// The checks below are optional capabilities of a Store, beside Hinter,
// Streamer, Catalog, Leaser and CredentialOwners: a backend implements
// the ones that mean something for it, and the daemon asks for each by
// this name (a store without one passes that check).

// StandbyChecker is a store that may read from a hot standby
// (store.read_url). CheckStandby verifies that the read connection, if
// any, is a hot standby of the store: errors wrap ErrNotStandby (or
// ErrUnavailable, or ErrSchema while the standby has not replayed the
// schema yet) and name the read URL, redacted.
type StandbyChecker interface {
	CheckStandby(ctx context.Context) error
}

// PlatformChecker is a store that can tell a database of the platform
// from another one before migrating it. CheckPlatform returns an error
// wrapping ErrNotPlatform when the database holds tables of its own but
// no sys_metadata; an empty database, or one with sys_metadata, passes.
type PlatformChecker interface {
	CheckPlatform(ctx context.Context) error
}

// EncryptionReporter is a store that connects to a server. Encrypted
// reports whether its connection uses TLS, and whether the server is on
// this host (a Unix socket or a loopback address), where plaintext
// crosses no network.
type EncryptionReporter interface {
	Encrypted(ctx context.Context) (enc, local bool, err error)
}
