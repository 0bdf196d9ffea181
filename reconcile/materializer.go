package reconcile

import (
	"context"
	"encoding/json"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Desired is what one entry should be, built from the current rows and
// everything the entry resolved. Materializers build instances from it.
type Desired struct {
	Kind      registry.Kind
	Key       string
	Revision  int64
	Signature string

	// Body is the entry's own body: the sys_metadata text of connector,
	// datasource and engine entries, as stored (the loop has checked that
	// it is a JSON object); nil for credentials. Materializers read the
	// body here and only here.
	Body json.RawMessage

	// Metadata is the source row of connector, datasource and engine
	// entries, for its other columns (type, name, checksum, organization,
	// package); nil where the caller has no row. Its text is Body's.
	Metadata *snapshot.MetadataRow

	// CredentialRef is the credential the entry resolved ("" if none).
	CredentialRef string
	// Secret is that credential's value (connector: auth.credentialRef;
	// datasource: external.credentialsRef or the borrowed connector's).
	Secret secret.Secret

	// Refs are the entries the body's references resolved to (all present;
	// objects defined in code are left out): "engine/object/account",
	// "datasource/crm", a borrowed connector.
	Refs []registry.Ref
}

// Materializer builds live instances of one kind. Materialize must honour
// ctx (apply.timeout) and classify failures with Refused, Invalid or
// Transient; an unclassified error counts as transient. It never closes the
// previous instance: the loop swaps and closes after success.
type Materializer interface {
	Materialize(ctx context.Context, d Desired) (registry.Instance, error)
}

// MaterializerFunc adapts a function to Materializer.
type MaterializerFunc func(ctx context.Context, d Desired) (registry.Instance, error)

// Materialize calls f.
func (f MaterializerFunc) Materialize(ctx context.Context, d Desired) (registry.Instance, error) {
	return f(ctx, d)
}

// Revalidator is an instance that can check again that it still works
// (revalidate.interval): a connector probes its upstream again, a
// datasource pings its database. Revalidate must honour ctx and classify
// a failure as Materialize does: a refusal holds the entry, a transient
// failure degrades it.
type Revalidator interface {
	Revalidate(ctx context.Context) error
}

// NopInstance is an instance with nothing to close.
type NopInstance struct{}

// Close does nothing.
func (NopInstance) Close() error { return nil }

// Change is one applied change, as told to notify targets: addresses and
// states only, never bodies or secrets.
type Change struct {
	Kind     registry.Kind  `json:"kind"`
	Key      string         `json:"key"`
	Action   Action         `json:"action"`
	Revision int64          `json:"revision"`
	State    registry.State `json:"state"`
	// At is the revision's watermark time (when the row was written, by
	// the store's clock); zero for an eviction (the row is gone).
	At time.Time `json:"at,omitzero"`
}

// Action is what a pass did to an entry.
type Action string

// The actions.
const (
	ActionCreate  Action = "create"
	ActionRebuild Action = "rebuild"
	ActionEvict   Action = "evict"
	ActionRetry   Action = "retry"
)

// ChangeSet is what one pass changed.
type ChangeSet struct {
	ReplicaID string   `json:"replica"`
	Cursor    string   `json:"cursor"`
	Changes   []Change `json:"changes"`
	// StoreAt is the store's clock at the read this pass applied
	// (snapshot.Cursor.At), PolledAt this process's clock when that read
	// answered: together they map a local moment to the store's clock.
	StoreAt  time.Time `json:"-"`
	PolledAt time.Time `json:"-"`
}

// Notifier is told about each pass that changed something. Notify must not
// block the loop: implementations queue and coalesce.
type Notifier interface {
	Notify(cs ChangeSet)
}
