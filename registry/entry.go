package registry

import (
	"fmt"
	"time"
)

// Kind names a registry.
type Kind string

// The kinds, in apply order: what an entry depends on is applied first.
const (
	KindCredential Kind = "credential"
	KindConnector  Kind = "connector"
	KindDatasource Kind = "datasource"
	// KindEngine holds the metadata of every other type (object, view,
	// hook, flow, …), compiled by drivers/engine; keys: EngineKey.
	KindEngine Kind = "engine"
)

// Kinds lists every kind in dependency (apply) order.
var Kinds = []Kind{KindCredential, KindConnector, KindDatasource, KindEngine}

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown kind %q (want credential, connector, datasource or engine)", s)
}

// State is an entry's state.
type State string

// The states.
const (
	StatePending  State = "pending"  // not tried yet
	StateReady    State = "ready"    // materialized and serving its signature
	StateDegraded State = "degraded" // transient failure: retried with backoff
	StateHeld     State = "held"     // refused or invalid: waits for a signature change
)

// States lists every state.
var States = []State{StatePending, StateReady, StateDegraded, StateHeld}

// ParseState returns the state named s.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown state %q (want pending, ready, degraded or held)", s)
}

// Instance is a live, materialized thing: a pool, a client, a compiled item.
type Instance interface {
	Close() error
}

// Entry is one registry entry. Its exported fields are the contract of
// GET /v1/items.
type Entry struct {
	Kind Kind   `json:"kind"`
	Key  string `json:"key"`
	// KeyParts are the key's parts (org, type, name, package), set by Put.
	KeyParts
	Revision  int64  `json:"revision"`  // desired revision
	Signature string `json:"signature"` // desired signature last acted on
	State     State  `json:"state"`
	Reason    string `json:"reason"`
	// Since is when the entry entered its state.
	Since time.Time `json:"since"`
	// ServingRevision is the revision of the live instance (0: none).
	ServingRevision int64 `json:"serving_revision"`
	// ServingSignature is the signature of the live instance ("" if none).
	ServingSignature string `json:"-"`
	// Attempts counts consecutive transient failures (backoff exponent).
	Attempts int `json:"attempts,omitempty"`
	// RetryAt is when a degraded entry is retried next.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Guarded: the entry's row is gone but the eviction guard keeps it
	// serving (Reason says why) until the row comes back or a release.
	Guarded bool `json:"guarded,omitempty"`
	// Instance is the live instance, nil when none serves.
	Instance Instance `json:"-"`
	// History is the entry's last transitions (GET /v1/item shows them).
	History History `json:"-"`
}

// Ref is the address of an entry across registries.
type Ref struct {
	Kind Kind
	Key  string
}

// String prints "kind/key".
func (r Ref) String() string { return string(r.Kind) + "/" + r.Key }
