package registry

import "time"

// A replica's restart by its sidecar (replica.restart.command) is a state
// of the replica beside the sidecar, like its entries' replica states: it
// crosses from the replica driver to heartbeats (the store), the status
// API and the CLI, so its types live here.

// RestartPhase is where a sidecar is in restarting its node.
type RestartPhase string

// The restart phases.
const (
	// RestartOff: no replica.restart.command (stale entries name the
	// remedy).
	RestartOff RestartPhase = "off"
	// RestartIdle: nothing stale, nothing to do.
	RestartIdle RestartPhase = "idle"
	// RestartPlanned: stale entries wait for replica.restart.after or
	// replica.restart.min_interval (Reason says which, and until when).
	RestartPlanned RestartPhase = "planned"
	// RestartRefused: due, but not safe now (Reason: the lease is held,
	// another replica is not ready or is restarting, the node is down).
	RestartRefused RestartPhase = "refused"
	// RestartInFlight: this sidecar holds the restart lease and restarts
	// its node, until it is ready and healed again.
	RestartInFlight RestartPhase = "in-flight"
	// RestartDone: the last restart healed the node and cleared its stale
	// entries.
	RestartDone RestartPhase = "done"
	// RestartFailed: the last restart failed, did not heal the node within
	// the lease, or left stale entries (Reason); not repeated before
	// replica.restart.min_interval.
	RestartFailed RestartPhase = "failed"
	// RestartWouldRestart: shadow mode; the restart is due and safe, and
	// is not done.
	RestartWouldRestart RestartPhase = "would-restart"
)

// RestartPhases lists every phase (metrics' label values).
var RestartPhases = []RestartPhase{RestartOff, RestartIdle, RestartPlanned, RestartRefused, RestartInFlight, RestartDone, RestartFailed, RestartWouldRestart}

// NodeRestart is a sidecar's restart of its node.
type NodeRestart struct {
	Phase RestartPhase `json:"phase,omitempty"`
	// Reason says why (planned until when, refused why, failed how).
	Reason string `json:"reason,omitempty"`
	// Since is when the phase began.
	Since time.Time `json:"since,omitzero"`
	// LastAt is when the last restart began (zero: none), LastResult and
	// LastReason how it ended (done or failed; empty while in flight), and
	// Count how many this replica id's sidecars ran.
	LastAt     time.Time    `json:"last_at,omitzero"`
	LastResult RestartPhase `json:"last_result,omitempty"`
	LastReason string       `json:"last_reason,omitempty"`
	Count      int          `json:"count,omitempty"`
}

// ReplicaRestart is the restart part of the replica section of status
// (replica_sync.restart of GET /v1/status).
type ReplicaRestart struct {
	NodeRestart
	// Enabled: replica.restart.command is set.
	Enabled bool `json:"enabled"`
	// Shadow: restarts are reported, not done (replica.mode shadow).
	Shadow bool `json:"shadow,omitempty"`
	// Ready: the node answered /api/v1/ready 200 when last read.
	Ready bool `json:"ready"`
	// NoLanes names a replica that applies no lane message at all, with
	// the remedy ("" when it applies them).
	NoLanes string `json:"no_lanes,omitempty"`
}
