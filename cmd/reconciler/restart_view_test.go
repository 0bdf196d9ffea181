package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The fleet table flags each replica's node: not ready, stale entries, no
// lanes, the restart's phase and the last one's result.
func TestFleetNodeFlags(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name string
		node snapshot.Node
		want []string
	}{
		{"not reported", snapshot.Node{}, nil},
		{"ready, nothing to do", snapshot.Node{Reported: true, Ready: true, Restart: registry.NodeRestart{Phase: registry.RestartIdle}}, nil},
		{"off with stale entries", snapshot.Node{Reported: true, Ready: true, Stale: 2, Restart: registry.NodeRestart{Phase: registry.RestartOff}},
			[]string{"2 stale", "restarts off"}},
		{"restarting", snapshot.Node{Reported: true, Stale: 1, Restart: registry.NodeRestart{Phase: registry.RestartInFlight, Since: now.Add(-20 * time.Second), LastAt: now}},
			[]string{"NODE NOT READY", "1 stale", "RESTARTING for 20s"}},
		{"refused", snapshot.Node{Reported: true, Ready: true, Stale: 1, Restart: registry.NodeRestart{Phase: registry.RestartRefused, Reason: "replica b is restarting"}},
			[]string{"1 stale", "restart refused: replica b is restarting"}},
		{"done", snapshot.Node{Reported: true, Ready: true, Restart: registry.NodeRestart{Phase: registry.RestartDone, LastAt: now.Add(-time.Minute), LastResult: registry.RestartDone}},
			[]string{"restarted 1m0s ago (done)"}},
		{"deaf", snapshot.Node{Reported: true, Ready: true, Nudged: 3, Deaf: true}, []string{"NO LANES: the node applies no lane message"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeFlags(tc.node, now)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("flags %q, want %q", got, tc.want)
			}
		})
	}
}

// status prints the restart in the replica section: a replica that
// applies no lane, the restart and the last one.
func TestStatusReplicaSection(t *testing.T) {
	t.Parallel()
	now := time.Now()
	sum := &registry.ReplicaReport{
		Counts: map[registry.ReplicaState]int{registry.ReplicaInSync: 3, registry.ReplicaStale: 1}, Restarts: 2, Reachable: true,
		Restart: &registry.ReplicaRestart{Enabled: true, Ready: true, NoLanes: "the replica applies no lane message at all",
			NodeRestart: registry.NodeRestart{Phase: registry.RestartRefused, Reason: "1 stale entry (engine permission/x): replica b is restarting",
				Since: now.Add(-5 * time.Second), LastAt: now.Add(-time.Hour), LastResult: registry.RestartFailed, LastReason: "the restart did not clear 1 stale entry", Count: 1}},
	}
	var out bytes.Buffer
	printRestart(&out, sum.Restart, now)
	for _, want := range []string{
		"WARNING\tthe replica applies no lane message at all",
		"restart\trefused for 5s: 1 stale entry (engine permission/x): replica b is restarting",
		"last restart\t1h0m0s ago (1 in all), failed: the restart did not clear 1 stale entry",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printRestart(&out, nil, now)
	if out.Len() != 0 {
		t.Fatalf("a status without a replica printed %q", out.String())
	}
}
