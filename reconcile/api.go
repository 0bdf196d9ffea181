package reconcile

import (
	"context"
	"log/slog"
	"time"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Options configure a Reconciler. Zero values take the documented defaults.
type Options struct {
	ReplicaID      string        // default: hostname
	PollInterval   time.Duration // default 1s
	PollJitter     time.Duration // polls come up to this much early (spread); default 10% of PollInterval, <0 none
	ResyncInterval time.Duration // anti-entropy relist; default 10m; <0 disables
	// RevalidateInterval is how often ready connectors and datasources
	// are checked again (revalidate.go); default 10m; <0 disables.
	RevalidateInterval time.Duration
	ApplyConcurrency   int           // default 4
	ApplyTimeout       time.Duration // default 30s
	// PassBudget is how long a pass waits for a kind's connector or
	// datasource materializations; those still running then finish in the
	// background, so slow upstreams do not hold back other work. Default:
	// PollInterval, at least 1s.
	PassBudget time.Duration
	StallAge   time.Duration // open transactions older than this are reported; default 5×PollInterval
	RetryBase  time.Duration // first retry delay of a degraded entry; default 5s
	RetryMax   time.Duration // retry delay cap; default 300s
	// SchemaCheckInterval is how often a store that can check its schema
	// (snapshot.Store) is checked while running, so that a dropped journal
	// trigger shows (store down, naming it); default 30s, <0 never.
	SchemaCheckInterval time.Duration
	// StopTimeout bounds how long Run takes to return once its context
	// ends, whatever a materializer does; default 3s.
	StopTimeout time.Duration
	// Stop, if set, is asked for the context of the stop once Run's
	// context has ended: its deadline bounds Run's return instead of
	// StopTimeout (a daemon's one stop budget, less what its phases after
	// the loop need; see internal/shutdown).
	Stop func() context.Context

	// Materializers per kind. A kind without one gets a no-op materializer
	// (credential entries never need one).
	Materializers map[registry.Kind]Materializer
	// Notifier, if set, is told about every pass that changed something.
	Notifier Notifier
	// Metrics, if set, is updated by the loop.
	Metrics *Metrics
	// Logger; default discards.
	Logger *slog.Logger
	// Secrets opens sys_secret rows; nil leaves every sys_secret credential
	// held ("no secret key configured").
	Secrets SecretOpener
	// Owners records which organization each connector credential ref
	// serves, for the whole fleet; nil: the Source's, when it records
	// them (a snapshot.Store does), else the loop's memory only.
	Owners CredentialOwners
	// CodeObjects are object names the platform defines in code: references
	// to them resolve without a row (as do names beginning with "sys_").
	CodeObjects []string
	// Limits cap what one metadata body may cost (size, references); zero
	// fields take the metadata package's defaults.
	Limits metadata.Limits
	// SyncGCPercent, if above the garbage collector's own setting, is the
	// GOGC the process runs at while the first full sync reads and
	// applies, set back once it has (see gc.go). 0 (the default) leaves
	// the collector alone: it is the whole process's setting. The daemon
	// sets DefaultSyncGCPercent unless GOGC is set in its environment.
	SyncGCPercent int

	// OnPass, if set, is called after every pass (from the loop goroutine;
	// must not block for long).
	OnPass func(PassResult)
	// Guard configures the eviction guard (guard.max_evictions,
	// guard.window); the zero value guards with the defaults.
	Guard GuardOptions
	// ReplicaDrift, if set, gives the replica part of drift reports (what
	// the replica beside this sidecar does not serve yet).
	ReplicaDrift func() *registry.ReplicaReport
}

// Cause names why a pass ran: the value of the "trigger" label of
// reconciler_passes_total and of PassResult's "trigger" member.
type Cause string

// The causes. CauseManual's value is "trigger", after the CLI command
// (reconciler trigger, POST /v1/reconcile, SIGHUP) that asks for it.
const (
	CauseStart       Cause = "start"
	CausePoll        Cause = "poll"
	CauseHint        Cause = "hint"
	CauseManual      Cause = "trigger"
	CauseResync      Cause = "resync"
	CauseAntiEntropy Cause = "anti_entropy"
	CauseExpired     Cause = "expired"
	CauseRegressed   Cause = "regressed"
	CauseRetry       Cause = "retry"
	CauseRecovered   Cause = "recovered"
	CauseItemRetry   Cause = "item_retry" // Retry: reconciler retry, POST /v1/item/retry
)

// PassResult describes one pass.
type PassResult struct {
	Cause    Cause           `json:"trigger"`
	At       time.Time       `json:"at"`
	Duration time.Duration   `json:"duration"`
	Relist   bool            `json:"relist"`
	Changes  []Change        `json:"changes,omitempty"`
	Cursor   snapshot.Cursor `json:"cursor"`
	Err      string          `json:"error,omitempty"`
}

// Status is a point-in-time view of the loop for /v1/status and heartbeats.
type Status struct {
	ReplicaID  string          `json:"replica"`
	StartedAt  time.Time       `json:"started_at"`
	Synced     bool            `json:"synced"` // first full sync done
	StoreUp    bool            `json:"store_up"`
	Cursor     snapshot.Cursor `json:"cursor"`
	LagSeconds float64         `json:"lag_seconds"` // age of the newest cursor
	LastPass   *PassResult     `json:"last_pass,omitempty"`
	LastError  string          `json:"last_error,omitempty"`
	// Counts per kind and state.
	Counts map[registry.Kind]map[registry.State]int `json:"counts"`
	// Stall names open writing transactions holding back changes.
	Stall  snapshot.Stall `json:"stall"`
	Passes int64          `json:"passes"`
	// Guard is the eviction guard: the evictions it keeps from happening.
	Guard GuardStatus `json:"guard"`
	// Abandoned counts the calls into materializers (Materialize past
	// apply.timeout or cut at a stop, Close past its bound) that the loop
	// stopped waiting for and that have not returned yet.
	Abandoned int `json:"abandoned"`
	// Revision is the highest revision among the rows the loop has read
	// (every change up to it is applied to the registries), RevisionAt
	// when it last moved, by the store's clock.
	Revision   int64     `json:"revision"`
	RevisionAt time.Time `json:"revision_at,omitzero"`
}

// DriftItem is one entry that differs from what the rows say.
type DriftItem struct {
	Kind            registry.Kind  `json:"kind"`
	Key             string         `json:"key"`
	State           registry.State `json:"state,omitempty"`
	Reason          string         `json:"reason,omitempty"`
	Since           time.Time      `json:"since,omitzero"`
	Revision        int64          `json:"revision"`
	ServingRevision int64          `json:"serving_revision"`
}

// DriftSummary counts a drift report's sections.
type DriftSummary struct {
	Desired            int `json:"desired"`
	Ready              int `json:"ready"`
	NotReady           int `json:"not_ready"`
	SignatureMismatch  int `json:"signature_mismatch"`
	Orphans            int `json:"orphans"`
	Missing            int `json:"missing"`
	ChecksumMismatches int `json:"checksum_mismatches"`
	// Guarded counts the evictions the eviction guard holds back.
	Guarded int `json:"guarded"`
}

// DriftReport says what differs between the desired rows and this
// sidecar's registries. It never contains a secret.
type DriftReport struct {
	ReplicaID          string       `json:"replica"`
	At                 time.Time    `json:"at"`
	Cursor             string       `json:"cursor"`
	LagSeconds         float64      `json:"lag_seconds"`
	Summary            DriftSummary `json:"summary"`
	NotReady           []DriftItem  `json:"not_ready"`
	SignatureMismatch  []DriftItem  `json:"signature_mismatch"`
	Orphans            []DriftItem  `json:"orphans"`
	Missing            []DriftItem  `json:"missing"`
	ChecksumMismatches []DriftItem  `json:"checksum_mismatches"`
	// Guarded are the entries whose rows are gone but that the eviction
	// guard keeps serving.
	Guarded []DriftItem    `json:"guarded"`
	Stall   snapshot.Stall `json:"stall"`
	// ReplicaSync is what the replica beside this sidecar does not serve
	// as the rows say (absent when no replica is driven).
	ReplicaSync *registry.ReplicaReport `json:"replica_sync,omitempty"`
}

// Clean reports whether the report found no drift.
func (d DriftReport) Clean() bool {
	s := d.Summary
	return s.NotReady+s.SignatureMismatch+s.Orphans+s.Missing+s.ChecksumMismatches+s.Guarded == 0 && len(d.Stall.Blockers) == 0 &&
		(d.ReplicaSync == nil || len(d.ReplicaSync.Lagging) == 0)
}
