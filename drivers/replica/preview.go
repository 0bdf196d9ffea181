package replica

import (
	"encoding/json"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Message is one lane message a change would be told with (`reconciler
// validate`): the channel (without the bus prefix) and the payload.
type Message struct {
	Channel string          `json:"channel"`
	Payload json.RawMessage `json:"payload"`
}

// Messages returns the lane messages a Driver publishes for the change c
// when its replica lacks it, with origin as originNode (none for a key it
// does not drive).
func Messages(c reconcile.Change, origin string) []Message {
	parts, err := registry.ParseKey(c.Kind, c.Key)
	if err != nil {
		return nil
	}
	var out []Message
	for _, l := range lanesFor(c.Kind, parts, c.Action == reconcile.ActionEvict) {
		p, err := json.Marshal(l.payload(origin, time.Unix(0, 0)))
		if err != nil {
			continue
		}
		out = append(out, Message{Channel: l.Channel, Payload: p})
	}
	return out
}

// StaysStale reports whether a change of the entry reaches no replica
// through the lanes (ObjectStack 17.4 reloads flows and permission sets
// only at boot): after it, the entry's replica state is stale, with
// RestartRemedy.
func StaysStale(kind registry.Kind, key string) bool {
	parts, err := registry.ParseKey(kind, key)
	if err != nil {
		return false
	}
	c := classify(kind, parts)
	return c == classFlow || c == classPermission
}
