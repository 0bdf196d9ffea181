//go:build objectstack

package objectstack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// guardOf reads a daemon's GET /v1/guard.
func guardOf(t *testing.T, d *Daemon) (held int, reason string) {
	t.Helper()
	code, body, err := d.Get("/v1/guard")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/guard: %d %v %s", code, err, body)
	}
	var g struct {
		Held   int    `json:"held"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &g); err != nil {
		t.Fatal(err)
	}
	return g.Held, g.Reason
}

// passesOf reads a daemon's pass count.
func passesOf(t *testing.T, d *Daemon) int64 {
	t.Helper()
	_, body, err := d.Get("/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Passes int64 `json:"passes"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return st.Passes
}

// waitServes waits until every node serves exactly want of names,
// probing once a second and stopping at the first name that disagrees (a
// node answers a probe of an object without a table with a logged 500:
// probing 30 objects at 20 Hz drowns it). It returns how long it took.
func waitServes(t *testing.T, what string, nodes []*Node, names []string, want bool, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for _, n := range nodes {
		if err := poll(within, time.Second, nil, func() error {
			for _, name := range names {
				if served(t, n, name) != want {
					return fmt.Errorf("node %s: %s (%s)", n.Name, what, name)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

// servesAll tells how many of names node serves.
func servesAll(t *testing.T, node *Node, names []string) int {
	t.Helper()
	n := 0
	for _, name := range names {
		if served(t, node, name) {
			n++
		}
	}
	return n
}

func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

// TestGuardOnRealNodes: 32 objects served by two real nodes, each with its
// sidecar. Deleting 2 rows is applied (both nodes stop serving them);
// deleting the other 30 in one statement is guarded: both sidecars hold it
// and both nodes still serve all 30 after several poll intervals. One
// `reconciler guard release --store.url` lets both sidecars apply it. A
// TRUNCATE of sys_metadata is guarded the same way.
func TestGuardOnRealNodes(t *testing.T) {
	stack := NewStack(t)
	a := stack.StartNode("a")
	b := stack.StartNode("b")
	nodes := []*Node{a, b}
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	da := startReplicaDaemon(t, stack, a, stack.Redis.URL())
	db := startReplicaDaemon(t, stack, b, stack.Redis.URL())
	daemons := []*Daemon{da, db}
	figures := map[string]string{}

	objs := names("gobj", 0, 32)
	for _, name := range objs {
		insertObject(t, stack.DatabaseURL, name, noteBody(name))
	}
	waitServes(t, "serves 32 objects", nodes, objs, true, 3*time.Minute)

	start := time.Now()
	snapshottest.Exec(t, stack.DatabaseURL, `DELETE FROM sys_metadata WHERE name IN ('gobj00', 'gobj01')`)
	waitServes(t, "stopped serving gobj00 and gobj01", nodes, objs[:2], false, 3*time.Minute)
	figures["delete 2 of 32: commit → both nodes stopped serving them"] = time.Since(start).Round(time.Millisecond).String()

	rest := objs[2:]
	start = time.Now()
	snapshottest.Exec(t, stack.DatabaseURL, `DELETE FROM sys_metadata WHERE name LIKE 'gobj%'`)
	for _, d := range daemons {
		if err := poll(converge, 100*time.Millisecond, d.done, func() error {
			if held, _ := guardOf(t, d); held != 30 {
				return fmt.Errorf("guard holds %d", held)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	figures["delete 30: commit → both sidecars guard 30"] = time.Since(start).Round(time.Millisecond).String()
	_, reason := guardOf(t, da)
	t.Logf("guard reason: %s", reason)
	if !strings.Contains(reason, "30 of 30 engine entries would go in one pass") {
		t.Fatalf("guard reason %q", reason)
	}
	// Several poll intervals (1s each) later, both nodes still serve all 30.
	for _, d := range daemons {
		p0 := passesOf(t, d)
		if err := poll(converge, 100*time.Millisecond, d.done, func() error {
			if p := passesOf(t, d); p < p0+5 {
				return fmt.Errorf("%d passes since", p-p0)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if got := servesAll(t, n, rest); got != 30 {
			t.Fatalf("node %s serves %d of the 30 guarded objects after 5 polls of each sidecar", n.Name, got)
		}
	}
	figures["guarded: objects still served by each node after ≥5 polls"] = fmt.Sprintf("a %d/30, b %d/30", servesAll(t, a, rest), servesAll(t, b, rest))
	out := Reconcile(t, reconcilerBin, nil, "guard", "--store.url", stack.DatabaseURL)
	t.Logf("$ reconciler guard --store.url …\n%s", firstLines(out, 4))

	start = time.Now()
	out = Reconcile(t, reconcilerBin, nil, "guard", "release", "--store.url", stack.DatabaseURL)
	t.Logf("$ reconciler guard release --store.url …\n%s", out)
	waitServes(t, "stopped serving the 30 released", nodes, rest, false, 3*time.Minute)
	figures["guard release → both nodes stopped serving the 30"] = time.Since(start).Round(time.Millisecond).String()
	for _, d := range daemons {
		if held, _ := guardOf(t, d); held != 0 {
			t.Fatalf("after the release the guard holds %d", held)
		}
	}

	// TRUNCATE: the same guard.
	more := names("tobj", 0, 12)
	for _, name := range more {
		insertObject(t, stack.DatabaseURL, name, noteBody(name))
	}
	waitServes(t, "serves 12 new objects", nodes, more, true, 3*time.Minute)
	start = time.Now()
	snapshottest.Exec(t, stack.DatabaseURL, `TRUNCATE sys_metadata`)
	for _, d := range daemons {
		if err := poll(converge, 100*time.Millisecond, d.done, func() error {
			if held, _ := guardOf(t, d); held < 12 {
				return fmt.Errorf("guard holds %d", held)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	figures["TRUNCATE sys_metadata: commit → both sidecars guard it"] = time.Since(start).Round(time.Millisecond).String()
	for _, d := range daemons {
		p0 := passesOf(t, d)
		if err := poll(converge, 100*time.Millisecond, d.done, func() error {
			if p := passesOf(t, d); p < p0+5 {
				return fmt.Errorf("%d passes since", p-p0)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if got := servesAll(t, n, more); got != 12 {
			t.Fatalf("node %s serves %d of 12 objects after the TRUNCATE and 5 polls", n.Name, got)
		}
	}
	figures["TRUNCATE: objects still served by each node after ≥5 polls"] = fmt.Sprintf("a %d/12, b %d/12", servesAll(t, a, more), servesAll(t, b, more))
	Reconcile(t, reconcilerBin, nil, "guard", "release", "--store.url", stack.DatabaseURL)
	waitServes(t, "stopped serving after the second release", nodes, more, false, 3*time.Minute)
	for k, v := range figures {
		t.Logf("figure: %s: %s", k, v)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
