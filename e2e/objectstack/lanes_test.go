//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
)

// origin is the originNode of the messages the tests publish: no node
// has it, so no node drops them as its own.
const origin = "e2e-probe"

// TestLanes checks on two real nodes what a replica driver relies on:
// rows written with plain SQL are not served until one lane message names
// them, then both nodes apply them; flows of the platform's own writes on
// the bus; a permission set is not reloaded by its lane; a restarted node
// forgets run-time objects until a lane names them.
func TestLanes(t *testing.T) {
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	b := stack.StartNode("b")
	nodes := []*Node{a, b}
	sub, err := stack.Redis.PSubscribe(BusPrefix + "ps:*")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	bus := &busLog{sub: sub}

	// The platform's own write: one metadata.mutated from the writer,
	// applied by the other node.
	a.API().SaveMeta(t, "object", "rt_lane_api", []byte(`{"name":"rt_lane_api","label":"Lane","fields":{"title":{"type":"text"}},"sharingModel":"private","enable":{"apiEnabled":true}}`))
	msgs := bus.waitFor(t, 10*time.Second, 1)
	m := msgs[0]
	if m.Channel != "os:ps:metadata.mutated" || m.env.N == "" || m.env.P["originNode"] != m.env.N {
		t.Errorf("a's save published %s %s", m.Channel, m.Payload)
	}
	if ev, _ := m.env.P["event"].(map[string]any); ev["type"] != "object" || ev["name"] != "rt_lane_api" || ev["state"] != "active" || ev["organizationId"] != nil {
		t.Errorf("a's save published event %v", m.env.P["event"])
	}
	t.Logf("node a's object save published on %s: %s", m.Channel, m.Payload)
	waitObject(t, b, "rt_lane_api", ObjectServed)

	// An object written with plain SQL is served by neither node …
	if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", "rt_sql", `{"name":"rt_sql","label":"Sql","fields":{"title":{"type":"text","label":"Title"}},"sharingModel":"private","enable":{"apiEnabled":true}}`); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		stays(t, n, 3*time.Second, "rt_sql", ObjectNotRegistered)
	}
	// … until one lane message names it; then both register it (no node
	// creates its table: only a writing node syncs DDL).
	start := time.Now()
	publish(t, stack, LaneMetadataMutated, MetadataMutated(origin, "object", "rt_sql", "active", nil), 2)
	for _, n := range nodes {
		waitObject(t, n, "rt_sql", ObjectNoTable)
	}
	t.Logf("rt_sql registered on both nodes %s after the publish", time.Since(start).Round(time.Millisecond))

	// A field added with SQL is applied only after the lane.
	v2 := `{"name":"rt_sql","label":"Sql","fields":{"title":{"type":"text","label":"Title"},"qty":{"type":"number","label":"Qty"}},"sharingModel":"private","enable":{"apiEnabled":true}}`
	if err := UpdateMetadata(ctx, stack.DatabaseURL, "object", "rt_sql", v2); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if ok, err := n.API().ProbeField("rt_sql", "qty"); err != nil || ok {
			t.Errorf("node %s: field qty applied=%v (%v) before any lane message", n.Name, ok, err)
		}
		l, err := n.API().Layers("object", "rt_sql")
		if err != nil {
			t.Fatal(err)
		}
		if ok, diff := l.Applied(); ok || !strings.Contains(diff, "fields.qty") {
			t.Errorf("node %s: layers applied=%v (%s) before any lane message", n.Name, ok, diff)
		}
	}
	publish(t, stack, LaneMetadataMutated, MetadataMutated(origin, "object", "rt_sql", "active", nil), 2)
	for _, n := range nodes {
		waitCond(t, 10*time.Second, fmt.Sprintf("node %s applies field qty", n.Name), func() error {
			l, err := n.API().Layers("object", "rt_sql")
			if err != nil {
				return err
			}
			if ok, diff := l.Applied(); !ok {
				return fmt.Errorf("layers differ: %s", diff)
			}
			if ok, err := n.API().ProbeField("rt_sql", "qty"); err != nil || !ok {
				return fmt.Errorf("field probe: %v %v", ok, err)
			}
			return nil
		})
	}

	// Deleted with SQL: unregistered after a "deleted" message.
	if err := DeleteMetadata(ctx, stack.DatabaseURL, "object", "rt_sql"); err != nil {
		t.Fatal(err)
	}
	publish(t, stack, LaneMetadataMutated, MetadataMutated(origin, "object", "rt_sql", "deleted", nil), 2)
	for _, n := range nodes {
		waitObject(t, n, "rt_sql", ObjectNotRegistered)
	}

	// A datasource: datasource.mutated after active=false evicts the
	// pools (status unvalidated), after true rebuilds them (ok).
	bus.drain()
	canary := "canary-" + randomHex(8)
	a.API().CreateDatasource(t, DatasourceDraft(t, "rt_ext", testdb.New(t)), canary)
	for _, msg := range bus.waitFor(t, 10*time.Second, 2) {
		if strings.Contains(msg.Payload, canary) {
			t.Fatalf("node a published the datasource's password on %s", msg.Channel)
		}
		t.Logf("node a's datasource create published on %s: %s", msg.Channel, msg.Payload)
	}
	// Node a lists what it created; node b applies the lane (its log
	// says so) but lists only the datasources it knew at boot.
	waitDatasource(t, a, "rt_ext", "ok")
	waitLog(t, b, `Registered driver {"driverName":"rt_ext"`, 1)
	if dss, err := b.API().Datasources(); err != nil || find(dss, "rt_ext") != nil {
		t.Logf("node b lists %+v (%v)", dss, err)
	}
	if err := SetDatasourceActive(ctx, stack.DatabaseURL, "rt_ext", false); err != nil {
		t.Fatal(err)
	}
	publish(t, stack, LaneDatasourceMutated, DatasourceMutated(origin, "rt_ext"), 2)
	waitDatasource(t, a, "rt_ext", "unvalidated")
	waitLog(t, b, `Unregistered driver {"driverName":"rt_ext"}`, 1)
	if err := SetDatasourceActive(ctx, stack.DatabaseURL, "rt_ext", true); err != nil {
		t.Fatal(err)
	}
	publish(t, stack, LaneDatasourceMutated, DatasourceMutated(origin, "rt_ext"), 2)
	waitDatasource(t, a, "rt_ext", "ok")
	waitLog(t, b, `Registered driver {"driverName":"rt_ext"`, 2)

	// A permission set changed with SQL stays stale in memory on 17.4,
	// whatever the lane says: only a boot reloads it.
	a.API().SaveMeta(t, "permission", "rt_perm", []byte(`{"name":"rt_perm","objects":{"rt_lane_api":{"allowRead":true,"allowEdit":true}}}`))
	if err := UpdateMetadata(ctx, stack.DatabaseURL, "permission", "rt_perm", `{"name":"rt_perm","objects":{"rt_lane_api":{"allowRead":true,"allowEdit":false}}}`); err != nil {
		t.Fatal(err)
	}
	publish(t, stack, LaneMetadataMutated, MetadataMutated(origin, "permission", "rt_perm", "active", nil), 2)
	for _, n := range nodes {
		// Give the lane the time it takes an object (under 2 s) several
		// times over before calling the copy stale.
		staysCond(t, 5*time.Second, fmt.Sprintf("node %s keeps its old copy of rt_perm", n.Name), func() error {
			l, err := n.API().Layers("permission", "rt_perm")
			if err != nil {
				return err
			}
			if ok, _ := l.Applied(); ok {
				return fmt.Errorf("applied")
			}
			return nil
		})
	}

	// A restarted node forgets run-time objects until a lane names them.
	before, err := b.Uptime()
	if err != nil {
		t.Fatal(err)
	}
	b.Restart()
	if after, err := b.Uptime(); err != nil || after >= before {
		t.Errorf("uptime after restart %s (%v), before %s: want lower", after, err, before)
	}
	waitObject(t, a, "rt_lane_api", ObjectServed)
	waitObject(t, b, "rt_lane_api", ObjectNotRegistered)
	if strings.Contains(b.CurrentLog(), "skipping sys_metadata hydration") {
		t.Logf("node b's log on restart says it skips hydration")
	}
	publish(t, stack, LaneMetadataMutated, MetadataMutated(origin, "object", "rt_lane_api", "active", nil), 2)
	waitObject(t, b, "rt_lane_api", ObjectServed)
	// After the restart, b's permission copy is the row's again.
	l, err := b.API().Layers("permission", "rt_perm")
	if err != nil {
		t.Fatal(err)
	}
	if ok, diff := l.Applied(); !ok {
		t.Errorf("node b after restart: permission rt_perm not the row's (%s)", diff)
	}
}

// busLog reads a subscription's messages.
type busLog struct {
	sub *Subscription
}

type busMessage struct {
	Message
	env struct {
		N string         `json:"n"`
		T int64          `json:"t"`
		P map[string]any `json:"p"`
	}
}

// waitFor returns the next n messages, failing the test when they do not
// come within the bound.
func (b *busLog) waitFor(t *testing.T, within time.Duration, n int) []busMessage {
	t.Helper()
	deadline := time.After(within)
	var out []busMessage
	for len(out) < n {
		select {
		case m, ok := <-b.sub.C:
			if !ok {
				t.Fatalf("bus subscription closed after %d of %d messages", len(out), n)
			}
			bm := busMessage{Message: m}
			if err := json.Unmarshal([]byte(m.Payload), &bm.env); err != nil {
				t.Errorf("message on %s is not the {n,t,p} envelope: %s", m.Channel, m.Payload)
			}
			out = append(out, bm)
		case <-deadline:
			t.Fatalf("%d of %d messages on the bus within %s", len(out), n, within)
		}
	}
	return out
}

// drain forgets the messages received so far.
func (b *busLog) drain() {
	for {
		select {
		case <-b.sub.C:
		default:
			return
		}
	}
}

// publish publishes a lane message and checks that at least nodes
// subscribers received it.
func publish(t *testing.T, stack *Stack, lane string, payload any, nodes int64) {
	t.Helper()
	n, err := stack.PublishLane(lane, origin, payload)
	if err != nil {
		t.Fatal(err)
	}
	if n < nodes {
		t.Fatalf("PUBLISH on %s reached %d subscribers, want at least %d (one per node)", lane, n, nodes)
	}
}

func waitObject(t *testing.T, n *Node, obj string, want ObjectState) {
	t.Helper()
	waitCond(t, 15*time.Second, fmt.Sprintf("node %s: %s %s", n.Name, obj, want), func() error {
		got, err := n.API().ProbeObject(obj)
		if err == nil && got != want {
			err = fmt.Errorf("it is %s", got)
		}
		return err
	})
}

func stays(t *testing.T, n *Node, d time.Duration, obj string, want ObjectState) {
	t.Helper()
	staysCond(t, d, fmt.Sprintf("node %s: %s stays %s", n.Name, obj, want), func() error {
		got, err := n.API().ProbeObject(obj)
		if err == nil && got != want {
			err = fmt.Errorf("it is %s", got)
		}
		return err
	})
}

func waitDatasource(t *testing.T, n *Node, name, status string) {
	t.Helper()
	waitCond(t, 15*time.Second, fmt.Sprintf("node %s: datasource %s %s", n.Name, name, status), func() error {
		dss, err := n.API().Datasources()
		if err != nil {
			return err
		}
		d := find(dss, name)
		if d == nil {
			return fmt.Errorf("not listed: %+v", dss)
		}
		if d.Status != status {
			return fmt.Errorf("status %s", d.Status)
		}
		return nil
	})
}

// waitLog waits until the node's current log holds text at least n times.
func waitLog(t *testing.T, n *Node, text string, times int) {
	t.Helper()
	waitCond(t, 15*time.Second, fmt.Sprintf("node %s logs %s %d times", n.Name, text, times), func() error {
		if c := strings.Count(n.CurrentLog(), text); c < times {
			return fmt.Errorf("%d times", c)
		}
		return nil
	})
}

// waitCond polls cond until it returns nil, failing the test after within.
func waitCond(t *testing.T, within time.Duration, what string, cond func() error) {
	t.Helper()
	if err := poll(within, 100*time.Millisecond, nil, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// staysCond checks cond every 250 ms for d, failing the test the first
// time it does not hold.
func staysCond(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	end := time.After(d)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-end:
			return
		case <-tick.C:
		}
	}
}
