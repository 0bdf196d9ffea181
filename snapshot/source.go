package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/objectstack-fleet/reconciler/secret"
)

// Table names a source table whose rows are desired state.
type Table string

// The source tables. sys_metadata and sys_secret are the platform's own
// (ObjectStack 17.4), adopted as they are; sys_connector_credential is the
// fleet's credential table.
const (
	TableMetadata   Table = "sys_metadata"
	TableSecret     Table = "sys_secret"
	TableCredential Table = "sys_connector_credential"
)

// Address is the key of one source row: a sys_metadata id, a sys_secret id
// or a credential ref. Journal entries are addresses only; callers re-read
// rows.
type Address struct {
	Table Table  `json:"table"`
	Key   string `json:"key"`
}

// Cursor is where a poll resumes. It is opaque to callers apart from its
// printed form; compare cursors only through a Store.
type Cursor struct {
	// StoreID identifies the store (set at migrate); a different one means a
	// new database, so the cursor has regressed.
	StoreID string `json:"store_id"`
	// Seq is the highest journal seq this cursor has seen (SQLite: the cursor
	// itself; PostgreSQL: used to detect a restored, older journal).
	Seq int64 `json:"seq"`
	// PGSnapshot is the textual pg_snapshot "xmin:xmax:xip,..." on PostgreSQL,
	// empty on SQLite.
	PGSnapshot string `json:"snapshot,omitempty"`
	// Seen lists, comma-separated, the journal xids at or above the
	// snapshot's xmin that were visible in it. Only cursors taken on a hot
	// standby carry it: a standby's pg_current_snapshot() has an empty
	// in-progress list, so what the cursor saw is recorded instead.
	Seen string `json:"seen,omitempty"`
	// At is when the cursor was taken, by the store's clock.
	At time.Time `json:"at"`
}

// IsZero reports whether c was never set (a relist is needed).
func (c Cursor) IsZero() bool { return c.StoreID == "" }

// String prints the cursor for status and logs.
func (c Cursor) String() string {
	if c.IsZero() {
		return "none"
	}
	if c.PGSnapshot != "" {
		return c.PGSnapshot
	}
	return "seq:" + itoa(c.Seq)
}

// MetadataRow is one sys_metadata row, as the platform writes it. NULL text
// columns read as "".
type MetadataRow struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	Name           string `json:"name"`
	OrganizationID string `json:"organization_id,omitempty"`
	PackageID      string `json:"package_id,omitempty"`
	// State is the platform's lifecycle state: only "active" rows are
	// desired; "draft", "archived", "deprecated", "inactive" and others are
	// not.
	State string `json:"state"`
	// Metadata is the body exactly as stored: JSON text in any key order, or
	// anything else a writer put there (the loop holds a body that is not a
	// JSON object).
	Metadata json.RawMessage `json:"metadata"`
	// Version is the platform's real-valued version column (0 when NULL).
	Version  float64 `json:"version"`
	Checksum string  `json:"checksum,omitempty"` // "" when NULL
	// Revision is the row's watermark from sys_reconciler_revision.
	Revision  int64     `json:"revision"`
	UpdatedAt time.Time `json:"updated_at"`
	// Withheld is the length in bytes of a body above the store's
	// OpenOptions.MaxBodyBytes, which was not read (Metadata is nil); 0
	// when the body was read. Negative: a body within the cap withheld
	// because the read's bodies passed OpenOptions.MaxTotalBytes (its
	// length negated): read the row again to have it.
	Withheld int64 `json:"withheld,omitempty"`
}

// SecretRow is one sys_secret row: an encrypted platform secret.
// Ciphertext is a Secret so that it cannot be printed by accident.
type SecretRow struct {
	ID         string        `json:"id"`
	Namespace  string        `json:"namespace,omitempty"`
	Key        string        `json:"key,omitempty"`
	KMSKeyID   string        `json:"kms_key_id,omitempty"`
	Alg        string        `json:"alg,omitempty"`
	Ciphertext secret.Secret `json:"-"`
	// Withheld is the length of a ciphertext above MaxCiphertextBytes,
	// which was not read (Ciphertext is empty); 0 when it was read.
	Withheld       int64   `json:"withheld,omitempty"`
	OrganizationID string  `json:"organization_id,omitempty"`
	Version        float64 `json:"version"`
	// Revision is the row's watermark from sys_reconciler_revision.
	Revision  int64     `json:"revision"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CredentialRow is one sys_connector_credential row. Value is a Secret so
// that it cannot be printed by accident.
type CredentialRow struct {
	Ref       string        `json:"ref"`
	Value     secret.Secret `json:"-"`
	Cleared   bool          `json:"cleared"` // value IS NULL
	Revision  int64         `json:"revision"`
	UpdatedAt time.Time     `json:"updated_at"`
}

// Rows is a set of current source rows. A key asked for in Read but absent
// from Rows has been deleted.
type Rows struct {
	Metadata    []MetadataRow
	Secrets     []SecretRow
	Credentials []CredentialRow
	// Revision is, for Read, the highest revision of the addresses read,
	// those of rows deleted since included (their tombstones); for Relist,
	// the store's highest revision in the relist's snapshot (deleted and
	// inactive rows' included). A deletion is a revision of the store's
	// head too, so the loop that applied it has applied the head (zero:
	// none known).
	Revision int64
}

// Len is the number of rows of all tables.
func (r Rows) Len() int { return len(r.Metadata) + len(r.Secrets) + len(r.Credentials) }

// SplitKeys groups addresses by table, for a backend's Read.
func SplitKeys(addrs []Address) (meta, secret, cred []string, err error) {
	for _, a := range addrs {
		switch a.Table {
		case TableMetadata:
			meta = append(meta, a.Key)
		case TableSecret:
			secret = append(secret, a.Key)
		case TableCredential:
			cred = append(cred, a.Key)
		default:
			return nil, nil, nil, fmt.Errorf("read: unknown table %q", a.Table)
		}
	}
	return meta, secret, cred, nil
}

// Blocker is an open writing transaction that holds back changes: they will
// apply when it commits. No query text is reported (it may hold secrets).
type Blocker struct {
	PID     int           `json:"pid"`
	XactAge time.Duration `json:"xact_age"`
	State   string        `json:"state"`
	App     string        `json:"application_name,omitempty"`
}

// Stall describes how far the store's committed changes are ahead of what a
// cursor can see.
type Stall struct {
	// Pending is the number of journal entries not yet visible to the cursor.
	Pending int64 `json:"pending"`
	// Blockers are open writing transactions older than the asked minimum age
	// (PostgreSQL only).
	Blockers []Blocker `json:"blockers,omitempty"`
	// Standby is the state of the hot standby that polls read, when the
	// store has one.
	Standby *Standby `json:"standby,omitempty"`
}

// Standby is how far the hot standby that polls read is behind the store.
type Standby struct {
	// ReplayLag is how long ago the standby replayed its last commit while
	// WAL it has not replayed exists on the primary (0 when caught up).
	ReplayLag time.Duration `json:"replay_lag"`
	// ReplayLagBytes is how much WAL the primary has written that the
	// standby has not replayed.
	ReplayLagBytes int64 `json:"replay_lag_bytes"`
	// ReplayPaused is set while replay is paused (pg_wal_replay_pause()).
	ReplayPaused bool `json:"replay_paused,omitempty"`
	// Promoted is set when the standby has left recovery (promoted): it
	// no longer follows store.url.
	Promoted bool `json:"promoted,omitempty"`
	// Error says why the standby could not be asked ("" when it was).
	Error string `json:"error,omitempty"`
}

// Heartbeat is one sidecar's heartbeat row of sys_reconciler_replica (the
// fleet's members; the replica node it serves is Node).
type Heartbeat struct {
	ReplicaID   string           `json:"replica_id"`
	Host        string           `json:"host"`
	PID         int              `json:"pid"`
	Version     string           `json:"version"`
	StartedAt   time.Time        `json:"started_at"`
	HeartbeatAt time.Time        `json:"heartbeat_at"`
	Cursor      string           `json:"cursor"`
	CursorSeq   int64            `json:"cursor_seq"`
	CursorAt    time.Time        `json:"cursor_at"`
	Counts      map[string]int64 `json:"counts"` // "kind/state" or "state" → n
	Stopped     bool             `json:"stopped"`
	LastError   string           `json:"last_error,omitempty"`
	// Clash names another process ("host pid N") that wrote this replica
	// id's heartbeat while this one ran, and ClashAt when that was last
	// seen: two live sidecars share one replica id (read only; Heartbeat
	// sets them).
	Clash   string    `json:"clash,omitempty"`
	ClashAt time.Time `json:"clash_at,omitzero"`
	// Node is what the sidecar sees of its replica node (Reported false:
	// nothing).
	Node Node `json:"node,omitzero"`
	// ConvergedRevision is the highest revision such that every change up
	// to it is served by this sidecar's replica (in-sync, or published
	// once where the replica does not show its state); ConvergedAt when
	// the last of them was served, by the store's clock. HeadRevision is
	// the highest revision the sidecar's loop has applied.
	ConvergedRevision int64     `json:"converged_revision"`
	ConvergedAt       time.Time `json:"converged_at,omitzero"`
	HeadRevision      int64     `json:"head_revision"`
	// UnservedSince is the watermark time (store's clock) of the oldest
	// current row revision above ConvergedRevision: how long the replica
	// has not served everything (read only; zero when it serves all).
	UnservedSince time.Time `json:"unserved_since,omitzero"`
}

// Watermark is the store's current head: the newest journal seq and when it
// was read. Fleet views compare replicas' cursors with it.
type Watermark struct {
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Revision is the store's highest row revision (deleted rows'
	// included), RevisionAt when it was written (zero: none yet).
	Revision   int64     `json:"revision"`
	RevisionAt time.Time `json:"revision_at,omitzero"`
}

// Hinter is implemented by stores that can wake the loop early. Listen
// blocks until ctx ends, calling wake (non-blocking) on every hint; it
// reconnects by itself and returns only ctx's error.
type Hinter interface {
	Listen(ctx context.Context, wake func()) error
}
