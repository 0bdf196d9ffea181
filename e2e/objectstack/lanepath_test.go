//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestLanePathOnRealNode measures commit → a real node serving a change
// written with plain SQL (a new field of rt_task: the node's data API
// answers 400 for an unknown field until it re-read the row), through the
// platform's push alone (the writer publishes metadata.mutated right after
// its commit, as a node does for a write through its API) and through the
// reconciler (the writer only commits; the sidecar notices, tells the node
// and checks), alternately, with the sidecar running throughout. It
// asserts only that every change is served; the figures go to the log
// (docs/benchmarks.md quotes them): on a real 17.4 node the node's own
// re-read of the row is the floor of both paths.
func TestLanePathOnRealNode(t *testing.T) {
	const n = 8
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	CreateApp(t, a)
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	d := startReplicaDaemon(t, stack, a, stack.Redis.URL())
	waitReplica(t, d, "engine", "object/rt_task", "in-sync")
	// Its start-up probes go first: at most replica.max_probes_per_second
	// start in any second, and a change right after them would wait.
	time.Sleep(2 * time.Second)

	var body map[string]any
	if err := json.Unmarshal([]byte(TaskBody), &body); err != nil {
		t.Fatal(err)
	}
	fields := body["fields"].(map[string]any)
	change := func(field string) time.Time {
		t.Helper()
		fields[field] = map[string]any{"type": "text", "label": field}
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := UpdateMetadata(ctx, stack.DatabaseURL, "object", "rt_task", string(raw)); err != nil {
			t.Fatal(err)
		}
		return start
	}
	servedAfter := func(field string, start time.Time) time.Duration {
		t.Helper()
		if err := poll(converge, 20*time.Millisecond, nil, func() error {
			if !servesField(t, a, "rt_task", field) {
				return fmt.Errorf("node a does not know rt_task.%s", field)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}

	// Changes come 1.5 s apart: a change of an entry whose previous change
	// is still being verified waits for that probe (up to ~0.3 s beside a
	// node re-syncing its hooks), which is not the lane's latency.
	var push, rec []time.Duration
	for i := range n {
		time.Sleep(1500 * time.Millisecond)
		field := fmt.Sprintf("push_%d", i)
		start := change(field)
		// The writer's own message: the sidecar sees it on the bus and
		// sends none.
		if _, err := stack.PublishLane(LaneMetadataMutated, "rt-writer", MetadataMutated("rt-writer", "object", "rt_task", "active", nil)); err != nil {
			t.Fatal(err)
		}
		push = append(push, servedAfter(field, start))

		time.Sleep(1500 * time.Millisecond)
		field = fmt.Sprintf("side_%d", i)
		rec = append(rec, servedAfter(field, change(field)))
	}
	p50 := func(xs []time.Duration) time.Duration {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("commit → node serving, %d changes each: push alone p50 %s (max %s), reconciler p50 %s (max %s): %.2f× the push alone",
		n, p50(push).Round(time.Millisecond), slices.Max(push).Round(time.Millisecond),
		p50(rec).Round(time.Millisecond), slices.Max(rec).Round(time.Millisecond), float64(p50(rec))/float64(p50(push)))
}
