package snapshot

import (
	"encoding/json"
	"time"
)

// Node is what a sidecar sees of the replica node beside it, carried by its
// heartbeat (column node, JSON): other sidecars restart their own node only
// while every live one of these is ready and none is restarting, and fleet
// views show it.
type Node struct {
	// Reported is false for a heartbeat that carries no node (a sidecar
	// that drives no replica, or an older one).
	Reported bool `json:"reported"`
	// Ready: the node answered /api/v1/ready 200 when last read, at
	// CheckedAt (the sidecar's clock).
	Ready     bool      `json:"ready"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// Stale and Nudged count the node's entries in those replica states.
	Stale  int `json:"stale,omitempty"`
	Nudged int `json:"nudged,omitempty"`
	// Deaf: the node applies no lane message at all (every entry a lane
	// should update stays nudged).
	Deaf bool `json:"deaf,omitempty"`
	// Restart is the sidecar's restart of the node.
	Restart NodeRestart `json:"restart,omitzero"`
}

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

// nodeJSON is the node column's text ("" for a node not reported).
func nodeJSON(n Node) string {
	if !n.Reported {
		return ""
	}
	b, err := json.Marshal(n)
	if err != nil {
		return ""
	}
	return string(b)
}

// parseNode reads the node column; text that does not decode reads as
// nothing reported.
func parseNode(s string) Node {
	var n Node
	if s == "" || json.Unmarshal([]byte(s), &n) != nil {
		return Node{}
	}
	return n
}
