package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// fleetStore is what the fleet view reads: the store's head and every
// replica's heartbeat row.
type fleetStore interface {
	Head(ctx context.Context) (snapshot.Watermark, error)
	Heartbeats(ctx context.Context) ([]snapshot.Heartbeat, error)
}

// fleetReader returns the status page's fleet view, judged by this
// replica's poll interval (the heartbeat interval follows from it).
func fleetReader(store fleetStore, poll time.Duration) func(context.Context) (fleet.View, error) {
	return func(ctx context.Context) (fleet.View, error) {
		head, err := store.Head(ctx)
		if err != nil {
			return fleet.View{}, fmt.Errorf("read store head: %w", err)
		}
		reps, err := store.Heartbeats(ctx)
		if err != nil {
			return fleet.View{}, fmt.Errorf("read heartbeats: %w", err)
		}
		return fleet.Build(head, reps, snapshot.HeartbeatInterval(poll), time.Now()), nil
	}
}
