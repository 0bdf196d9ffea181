package registry_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
)

func TestReplicaStates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		state            registry.ReplicaState
		settled, drifted bool
	}{
		{registry.ReplicaPending, false, false},
		{registry.ReplicaInSync, true, false},
		{registry.ReplicaNudged, false, true},
		{registry.ReplicaStale, false, true},
		{registry.ReplicaUnservable, false, true},
		{registry.ReplicaUnverifiable, true, false},
		{registry.ReplicaWouldPublish, false, false},
	}
	if len(cases) != len(registry.ReplicaStates) {
		t.Fatalf("%d cases for %d states", len(cases), len(registry.ReplicaStates))
	}
	for i, tc := range cases {
		if registry.ReplicaStates[i] != tc.state {
			t.Errorf("ReplicaStates[%d] = %q, want %q", i, registry.ReplicaStates[i], tc.state)
		}
		if got := tc.state.Settled(); got != tc.settled {
			t.Errorf("%s: Settled %v, want %v", tc.state, got, tc.settled)
		}
		if got := tc.state.Drifted(); got != tc.drifted {
			t.Errorf("%s: Drifted %v, want %v", tc.state, got, tc.drifted)
		}
		if got, err := registry.ParseReplicaState(string(tc.state)); err != nil || got != tc.state {
			t.Errorf("ParseReplicaState(%q) = %q, %v", tc.state, got, err)
		}
	}
	if _, err := registry.ParseReplicaState("ready"); err == nil {
		t.Error("ParseReplicaState accepted an entry state")
	}
}

// The replica member's JSON is the contract of /v1/items.
func TestReplicaStatusJSON(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b, err := json.Marshal(registry.ReplicaItem{Kind: registry.KindEngine, Key: "flow/f",
		ReplicaStatus: registry.ReplicaStatus{State: registry.ReplicaStale, Attempts: 1, Remedy: "restart", Since: since}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"kind":"engine","key":"flow/f","state":"stale","attempts":1,"remedy":"restart","since":"2026-12-01T10:00:00Z"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
