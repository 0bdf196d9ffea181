//go:build objectstack

package objectstack

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestLanePathOnRealNode measures commit → the node serving an object
// written with plain SQL, through the platform's push alone (the writer
// publishes metadata.mutated right after its commit, as a node does for a
// write through its API) and through the reconciler (the writer only
// commits; the sidecar notices, tells the node and checks). It asserts
// only that every change is served; the figures go to the log
// (docs/benchmarks.md quotes them): on a real 17.4 node the node's own
// registration of the object is the floor of both paths.
func TestLanePathOnRealNode(t *testing.T) {
	const n = 6
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	CreateApp(t, a)
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)

	servedAfter := func(name string, start time.Time) time.Duration {
		t.Helper()
		if err := poll(converge, 5*time.Millisecond, nil, func() error {
			if !served(t, a, name) {
				return fmt.Errorf("node a does not serve %s", name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}

	var push []time.Duration
	for i := range n {
		name := fmt.Sprintf("rt_push_%d", i)
		start := time.Now()
		if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", name, noteBody(name)); err != nil {
			t.Fatal(err)
		}
		if _, err := stack.PublishLane(LaneMetadataMutated, "rt-writer", MetadataMutated("rt-writer", "object", name, "active", nil)); err != nil {
			t.Fatal(err)
		}
		push = append(push, servedAfter(name, start))
	}

	d := startReplicaDaemon(t, stack, a, stack.Redis.URL())
	waitReplica(t, d, "engine", "object/rt_push_0", "unservable") // registered, no table: the sidecar has looked
	var rec []time.Duration
	for i := range n {
		name := fmt.Sprintf("rt_side_%d", i)
		start := time.Now()
		if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", name, noteBody(name)); err != nil {
			t.Fatal(err)
		}
		rec = append(rec, servedAfter(name, start))
	}
	p50 := func(xs []time.Duration) time.Duration {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("commit → node serving, %d objects each: push alone p50 %s (max %s), reconciler p50 %s (max %s): %.2f× the push alone",
		n, p50(push).Round(time.Millisecond), slices.Max(push).Round(time.Millisecond),
		p50(rec).Round(time.Millisecond), slices.Max(rec).Round(time.Millisecond), float64(p50(rec))/float64(p50(push)))
}
