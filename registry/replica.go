package registry

import (
	"fmt"
	"strings"
	"time"
)

// The replica state of an entry lives here, beside the entry's own state,
// because it is a state of a registry entry: the one the replica beside the
// sidecar serves. It crosses from the replica driver (which sets it) to the
// loop's drift reports, the status API, its page and the CLI, and registry
// is the lowest package all of them import (reconcile imports no driver,
// drivers import no daemon), so each reads the same type and a renamed
// state fails to compile. A new state is one constant and its line in
// ReplicaStates (plus its case in Settled or Drifted if it is one); the
// metrics' label sets, the counts and ParseReplicaState follow the list.

// ReplicaState is what the sidecar knows of an entry on its replica.
type ReplicaState string

// The replica states of an entry.
const (
	// ReplicaPending: changed, not checked or published yet (the first
	// publish waits a random moment so that sidecars spread out).
	ReplicaPending ReplicaState = "pending"
	// ReplicaInSync: a probe saw the replica serve what the row says.
	ReplicaInSync ReplicaState = "in-sync"
	// ReplicaNudged: published, and the replica did not agree yet (or
	// could not be asked); nudged again with backoff. Attempts and Error
	// say how often and why.
	ReplicaNudged ReplicaState = "nudged"
	// ReplicaStale: the replica holds an older copy that no lane updates;
	// Remedy says what does.
	ReplicaStale ReplicaState = "stale"
	// ReplicaUnservable: the replica registered the entry but cannot serve
	// it (a table or field missing); Error names what is missing, Remedy
	// what brings it.
	ReplicaUnservable ReplicaState = "unservable"
	// ReplicaUnverifiable: published, but the replica does not show
	// whether it applied it.
	ReplicaUnverifiable ReplicaState = "unverifiable"
	// ReplicaWouldPublish: shadow mode; the replica lacks the change and
	// the sidecar would publish for it, but publishes nothing.
	ReplicaWouldPublish ReplicaState = "would-publish"
)

// ReplicaStates lists every replica state, in the order reports show them.
var ReplicaStates = []ReplicaState{
	ReplicaPending, ReplicaInSync, ReplicaNudged, ReplicaStale,
	ReplicaUnservable, ReplicaUnverifiable, ReplicaWouldPublish,
}

// ParseReplicaState returns the replica state named s.
func ParseReplicaState(s string) (ReplicaState, error) {
	for _, st := range ReplicaStates {
		if string(st) == s {
			return st, nil
		}
	}
	names := make([]string, len(ReplicaStates))
	for i, st := range ReplicaStates {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown replica state %q (want %s)", s, strings.Join(names, ", "))
}

// Settled reports whether nothing more can be done for the entry until it
// changes: the replica serves it (in-sync), or serves it as far as anyone
// can tell (unverifiable).
func (s ReplicaState) Settled() bool {
	return s == ReplicaInSync || s == ReplicaUnverifiable
}

// Drifted reports whether the state is drift, listed with its error and
// remedy by drift reports (nudged, stale, unservable): the replica does not
// serve what the row says, and was told.
func (s ReplicaState) Drifted() bool {
	switch s {
	case ReplicaNudged, ReplicaStale, ReplicaUnservable:
		return true
	}
	return false
}

// ReplicaStatus is an entry's replica state: the replica member of an item
// of GET /v1/items.
type ReplicaStatus struct {
	State    ReplicaState `json:"state"`
	Attempts int          `json:"attempts,omitempty"` // messages published for the current change
	Error    string       `json:"error,omitempty"`    // why the replica does not agree yet, or the last failure
	Remedy   string       `json:"remedy,omitempty"`   // what brings a stale or unservable entry back
	Since    time.Time    `json:"since"`
	// LastMessage is when a lane message for the entry was last published.
	LastMessage time.Time `json:"last_message,omitzero"`
	// LastProbe is when the replica was last asked about the entry, and
	// Probe what it answered ("in-sync", "lacks", "stale", "unservable",
	// "unobservable", or "failed: <why>").
	LastProbe time.Time `json:"last_probe,omitzero"`
	Probe     string    `json:"probe,omitempty"`
}

// ReplicaReport is the replica part of status (replica_sync of
// GET /v1/status) and of drift reports.
type ReplicaReport struct {
	// Counts are the entries per replica state (every state, 0 included).
	Counts map[ReplicaState]int `json:"counts"`
	// Restarts counts replica restarts noticed since start.
	Restarts int `json:"restarts"`
	// Reachable is false while the replica's health endpoint does not
	// answer.
	Reachable bool `json:"reachable"`
	// BusUp is false while publishing on the replica's bus fails (or no
	// bus is configured).
	BusUp bool `json:"bus_up"`
	// Driving is false while the sidecar publishes nothing for its
	// replica (it runs a platform version the sidecar does not drive).
	Driving bool `json:"driving"`
	// Errors are the failures that last now (the replica unreachable or
	// refusing the token, the bus down, an unknown platform version),
	// empty when none.
	Errors []string `json:"errors,omitempty"`
	// LastError is the last such failure, kept after it ended, and
	// LastErrorAt when it was seen.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Lagging lists the entries whose replica state is drift (Drifted),
	// sorted by kind and key (drift reports only).
	Lagging []ReplicaItem `json:"lagging,omitempty"`
	// Restart is the sidecar's restart of the replica (status only; nil
	// in drift reports and without a replica).
	Restart *ReplicaRestart `json:"restart,omitempty"`
}

// ReplicaItem is one entry of a ReplicaReport.
type ReplicaItem struct {
	Kind Kind   `json:"kind"`
	Key  string `json:"key"`
	ReplicaStatus
}
