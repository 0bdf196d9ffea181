//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// convergenceCount reads the daemon's reconciler_replica_convergence_seconds
// count and sum from /metrics.
func convergenceCount(t *testing.T, d *Daemon) (int, float64) {
	t.Helper()
	_, body, err := d.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	num := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` ([0-9.e+-]+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		f, _ := strconv.ParseFloat(string(m[1]), 64)
		return f
	}
	return int(num("reconciler_replica_convergence_seconds_count")), num("reconciler_replica_convergence_seconds_sum")
}

// revisionOf is the watermark revision of the active sys_metadata row.
func revisionOf(t *testing.T, dbURL, typ, name string) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var rev int64
	if err := c.QueryRow(ctx, `SELECT r.revision FROM sys_metadata m JOIN sys_reconciler_revision r
  ON r.source = 'sys_metadata' AND r.key = m.id WHERE m.type = $1 AND m.name = $2 AND m.state = 'active'`, typ, name).Scan(&rev); err != nil {
		t.Fatal(err)
	}
	return rev
}

// TestConvergenceOnRealNode: changes written with plain SQL that the node
// comes to serve are counted by reconciler_replica_convergence_seconds, and
// `reconciler fleet --json` shows the replica's converged revision covering
// them (and `fleet --change` the entry served).
func TestConvergenceOnRealNode(t *testing.T) {
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	CreateApp(t, a)
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	d := startReplicaDaemon(t, stack, a, stack.Redis.URL(), repairOn) // its SQL objects need their storage synced to be in-sync
	waitReplica(t, d, "engine", "object/rt_task", "in-sync")
	c0, s0 := convergenceCount(t, d)

	start := time.Now()
	if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", "rt_conv_note", noteBody("rt_conv_note")); err != nil {
		t.Fatal(err)
	}
	waitBoth(t, "serves rt_conv_note", []*Node{a}, func(n *Node) bool { return served(t, n, "rt_conv_note") })
	waitReplica(t, d, "engine", "object/rt_conv_note", "in-sync")
	wall := time.Since(start)
	if err := UpdateMetadata(ctx, stack.DatabaseURL, "object", "rt_task", TaskBodyV2); err != nil {
		t.Fatal(err)
	}
	waitBoth(t, "serves rt_task.priority", []*Node{a}, func(n *Node) bool { return servesField(t, n, "rt_task", "priority") })
	waitReplica(t, d, "engine", "object/rt_task", "in-sync")

	var c1 int
	var s1 float64
	waitCond(t, converge, "two more convergence observations", func() error {
		c1, s1 = convergenceCount(t, d)
		if c1 < c0+2 {
			return fmt.Errorf("count %d, was %d", c1, c0)
		}
		return nil
	})
	t.Logf("convergence: %d observations for 2 SQL changes, %.3fs on average (store's clock); the first: %s wall, commit → node serving",
		c1-c0, (s1-s0)/float64(c1-c0), wall.Round(time.Millisecond))

	want := max(revisionOf(t, stack.DatabaseURL, "object", "rt_conv_note"), revisionOf(t, stack.DatabaseURL, "object", "rt_task"))
	var view struct {
		Head struct {
			Revision int64 `json:"revision"`
		} `json:"head"`
		Replicas []struct {
			ReplicaID         string    `json:"replica_id"`
			ConvergedRevision int64     `json:"converged_revision"`
			ConvergedAt       time.Time `json:"converged_at"`
			HeadRevision      int64     `json:"head_revision"`
		} `json:"replicas"`
	}
	waitCond(t, converge, "fleet shows the converged revision", func() error {
		out := Reconcile(t, reconcilerBin, nil, "fleet", "--json", "--store.url", stack.DatabaseURL)
		if err := json.Unmarshal([]byte(out), &view); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, r := range view.Replicas {
			if r.ReplicaID == a.Name {
				if r.ConvergedRevision < want || r.ConvergedAt.IsZero() || r.HeadRevision < want {
					return fmt.Errorf("replica %s: converged %d at %v, head %d; want ≥ %d", r.ReplicaID, r.ConvergedRevision, r.ConvergedAt, r.HeadRevision, want)
				}
				return nil
			}
		}
		return fmt.Errorf("no replica %s in %s", a.Name, out)
	})
	t.Logf("fleet --json: %+v (store head revision %d)", view.Replicas, view.Head.Revision)

	var change struct {
		Revision int64 `json:"revision"`
		Replicas []struct {
			ReplicaID string `json:"replica_id"`
			Served    bool   `json:"served"`
		} `json:"replicas"`
	}
	out := Reconcile(t, reconcilerBin, nil, "fleet", "--change", "object/rt_conv_note", "--kind", "engine", "--json", "--store.url", stack.DatabaseURL)
	if err := json.Unmarshal([]byte(out), &change); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(change.Replicas) != 1 || !change.Replicas[0].Served {
		t.Fatalf("fleet --change object/rt_conv_note: %s", out)
	}

	// A deletion with no later change: once the node no longer serves the
	// object, the replica has converged on the store's head (the deletion's
	// revision), not one behind it.
	if err := DeleteMetadata(ctx, stack.DatabaseURL, "object", "rt_conv_note"); err != nil {
		t.Fatal(err)
	}
	waitBoth(t, "stops serving rt_conv_note", []*Node{a}, func(n *Node) bool { return !served(t, n, "rt_conv_note") })
	waitCond(t, converge, "fleet shows the replica converged on the head after the deletion", func() error {
		out := Reconcile(t, reconcilerBin, nil, "fleet", "--json", "--store.url", stack.DatabaseURL)
		if err := json.Unmarshal([]byte(out), &view); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, r := range view.Replicas {
			if r.ReplicaID == a.Name {
				if r.ConvergedRevision != view.Head.Revision {
					return fmt.Errorf("replica %s converged %d, store head %d", r.ReplicaID, r.ConvergedRevision, view.Head.Revision)
				}
				return nil
			}
		}
		return fmt.Errorf("no replica %s in %s", a.Name, out)
	})
	t.Logf("after the deletion: fleet --json %+v (store head revision %d)", view.Replicas, view.Head.Revision)
}
