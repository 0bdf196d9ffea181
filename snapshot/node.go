package snapshot

import (
	"encoding/json"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
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
	Restart registry.NodeRestart `json:"restart,omitzero"`
}

// NodeJSON is the node column's text ("" for a node not reported).
func NodeJSON(n Node) string {
	if !n.Reported {
		return ""
	}
	b, err := json.Marshal(n)
	if err != nil {
		return ""
	}
	return string(b)
}

// ParseNode reads the node column; text that does not decode reads as
// nothing reported.
func ParseNode(s string) Node {
	var n Node
	if s == "" || json.Unmarshal([]byte(s), &n) != nil {
		return Node{}
	}
	return n
}
