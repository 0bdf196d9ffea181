package postgres

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// A stall check right after a poll whose snapshot lists no transaction
// old enough to name sends nothing; a check with another cursor, or
// asking for every open writer (minAge 0), asks the server.
func TestStallAfterQuietPollSendsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, qc, _ := newTracedPG(t)
	_, c, err := p.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('x', 'object', 'x', '{}')`); err != nil {
		t.Fatal(err)
	}
	_, polled, err := p.Poll(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if polled.PGSnapshot == c.PGSnapshot {
		t.Fatalf("the poll after a write kept the snapshot %s", c.PGSnapshot)
	}
	qc.n.Store(0)
	st, err := p.Stall(ctx, polled, time.Second)
	if err != nil || st.Pending != 0 || len(st.Blockers) != 0 {
		t.Fatalf("stall after a quiet poll = %+v, %v", st, err)
	}
	if n := qc.n.Load(); n != 0 {
		t.Fatalf("stall after a quiet poll sent %d statements, want 0", n)
	}
	for name, call := range map[string]func() (snapshot.Stall, error){
		"another cursor": func() (snapshot.Stall, error) { return p.Stall(ctx, c, time.Second) },
		"minAge 0":       func() (snapshot.Stall, error) { return p.Stall(ctx, polled, 0) },
	} {
		qc.n.Store(0)
		if _, err := call(); err != nil {
			t.Fatal(err)
		}
		if n := qc.n.Load(); n != 1 {
			t.Errorf("stall with %s sent %d statements, want 1", name, n)
		}
	}
}

// With a standby, a quiet check stands while the standby's polls show it
// replaying past the primary's xmax of that check, for at most
// standbyStallKeepalive; anything held back is checked again every time.
func TestStallGateStandby(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cur := func(xmax int) snapshot.Cursor {
		return snapshot.Cursor{StoreID: "s", PGSnapshot: strconv.FormatInt(int64(xmax), 10) + ":" + strconv.FormatInt(int64(xmax), 10) + ":"}
	}
	for _, tc := range []struct {
		name     string
		check    snapshot.Stall
		checkAge time.Duration
		polled   snapshot.Cursor
		asked    snapshot.Cursor
		want     bool
	}{
		{"quiet, replayed past it", snapshot.Stall{Standby: &snapshot.Standby{ReplayLagBytes: 10}}, time.Second, cur(120), cur(120), true},
		{"quiet, standby not there yet", snapshot.Stall{Standby: &snapshot.Standby{}}, time.Second, cur(90), cur(90), false},
		{"quiet but old", snapshot.Stall{Standby: &snapshot.Standby{}}, standbyStallKeepalive, cur(120), cur(120), false},
		{"entries pending", snapshot.Stall{Pending: 1, Standby: &snapshot.Standby{}}, time.Second, cur(120), cur(120), false},
		{"replay paused", snapshot.Stall{Standby: &snapshot.Standby{ReplayPaused: true}}, time.Second, cur(120), cur(120), false},
		{"standby not asked", snapshot.Stall{Standby: &snapshot.Standby{Error: "down"}}, time.Second, cur(120), cur(120), false},
		{"a blocker", snapshot.Stall{Blockers: []snapshot.Blocker{{PID: 1}}, Standby: &snapshot.Standby{}}, time.Second, cur(120), cur(120), false},
		{"not the latest poll's cursor", snapshot.Stall{Standby: &snapshot.Standby{}}, time.Second, cur(120), cur(110), false},
	} {
		var g stallGate
		g.checked(now.Add(-tc.checkAge), "100", tc.check)
		g.polled(now, tc.polled, false)
		st, ok := g.answer(tc.asked, time.Second, true, now)
		if ok != tc.want {
			t.Errorf("%s: answered %v, want %v", tc.name, ok, tc.want)
		}
		if ok && (st.Standby == nil || *st.Standby != (snapshot.Standby{})) {
			t.Errorf("%s: answer %+v, want the standby caught up", tc.name, st.Standby)
		}
	}
}

// The xmax history keeps spanning minAge when polls are many times more
// frequent than checks: it thins out instead of forgetting.
func TestStallGateHistorySpans(t *testing.T) {
	t.Parallel()
	var g stallGate
	t0 := time.Now()
	for i := range 1000 {
		g.polled(t0.Add(time.Duration(i)*10*time.Millisecond), snapshot.Cursor{PGSnapshot: strconv.FormatInt(int64(i+1), 10) + ":" + strconv.FormatInt(int64(i+1), 10) + ":"}, true)
	}
	end := t0.Add(999 * 10 * time.Millisecond)
	if x := g.before(end, 5*time.Second); x == "0" {
		t.Fatal("history forgot what it saw 5s ago")
	}
	if len(g.samples) > maxXmaxSamples {
		t.Fatalf("history holds %d samples", len(g.samples))
	}
}
