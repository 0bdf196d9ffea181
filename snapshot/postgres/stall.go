package postgres

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The stall check is one statement on the primary (a fleet runs one every
// few polls per replica: each statement costs the server a fixed amount
// beyond its execution). Its parts: the journal entries the cursor has not
// seen ($1 the cursor's snapshot; on a standby cursor, $2 the xids it saw);
// the current xmax (remembered for the next checks); the primary's WAL
// position (to tell a standby's replay lag); and the open writing
// transactions older than $3 seconds. Only transactions that already held
// an xid at a check minAge ago ($4) can be those: pg_stat_activity, whose
// cost grows with the number of backends (and a fleet's stall checks with
// the fleet), is read only when the current snapshot lists one (a one-time
// filter); with minAge 0 ($5) always. (A snapshot lists only running xids
// below its xmax; one below an earlier check's xmax always is.)
const (
	stallPendingPrimary = `(SELECT count(*) FROM sys_reconcile_journal j
  WHERE j.xid >= pg_snapshot_xmin($1::text::pg_snapshot) AND NOT pg_visible_in_snapshot(j.xid, $1::text::pg_snapshot)
    AND $2::text[] IS NOT NULL)`
	stallPendingStandby = `(SELECT count(*) FROM sys_reconcile_journal j
  WHERE j.xid >= pg_snapshot_xmin($1::text::pg_snapshot) AND j.xid <> ALL ($2::text[]::xid8[]))`
	stallRest = `, pg_snapshot_xmax(pg_current_snapshot())::text,
  CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_current_wal_lsn()::text END,
  coalesce(b.pids, '{}'), coalesce(b.ages, '{}'), coalesce(b.states, '{}'), coalesce(b.apps, '{}')
FROM (SELECT array_agg(pid ORDER BY xact_start) AS pids,
    array_agg(extract(epoch FROM clock_timestamp() - xact_start)::float8 ORDER BY xact_start) AS ages,
    array_agg(coalesce(state, '') ORDER BY xact_start) AS states,
    array_agg(coalesce(application_name, '') ORDER BY xact_start) AS apps
  FROM pg_stat_activity
  WHERE ($5::bool OR EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) x WHERE x < $4::text::xid8))
    AND backend_xid IS NOT NULL AND datname = current_database() AND pid <> pg_backend_pid()
    AND xact_start <= clock_timestamp() - make_interval(secs => $3)) b`
	stallPrimarySQL = "SELECT " + stallPendingPrimary + stallRest
	stallStandbySQL = "SELECT " + stallPendingStandby + stallRest
)

// Stall implements Store in one statement on the primary (and, with a
// standby, one more there for its replay state), or in none when the
// latest poll already answers (stallGate.answer): a fleet's checks then
// cost the server nothing while no write is held back.
func (p *Store) Stall(ctx context.Context, cur snapshot.Cursor, minAge time.Duration) (snapshot.Stall, error) {
	if st, ok := p.stallGate.answer(cur, minAge, p.standby != nil, time.Now()); ok {
		return st, nil
	}
	var st snapshot.Stall
	snap := cur.PGSnapshot
	if snap == "" {
		snap = "1:1:"
	}
	q := stallPrimarySQL
	if p.standby != nil {
		q = stallStandbySQL
	}
	var (
		xmax, lsn    string
		pids         []int32
		ages         []float64
		states, apps []string
	)
	checked := time.Now()
	err := p.pool.QueryRow(ctx, q, snap, seenList(cur.Seen), minAge.Seconds(), p.stallGate.before(checked, minAge), minAge <= 0).
		Scan(&st.Pending, &xmax, &lsn, &pids, &ages, &states, &apps)
	if err != nil {
		return snapshot.Stall{}, p.interpretError("stall", err)
	}
	for i := range pids {
		st.Blockers = append(st.Blockers, snapshot.Blocker{PID: int(pids[i]), XactAge: time.Duration(ages[i] * float64(time.Second)),
			State: states[i], App: apps[i]})
	}
	if p.standby != nil {
		st.Standby = p.standbyState(ctx, lsn)
	}
	p.stallGate.checked(checked, xmax, st)
	return st, nil
}

// standbyStallKeepalive is how often, at least, a store with a standby
// checks the primary for stalls although its polls show the standby
// keeping up: open writes on the primary and WAL the standby has not
// received yet are seen only there.
const standbyStallKeepalive = 30 * time.Second

// stallGate remembers what past polls and stall checks saw, so that a
// stall check knows when it needs no statement, and which xids were
// already assigned minAge ago (only a transaction holding one of those can
// have been writing for minAge).
type stallGate struct {
	mu      sync.Mutex
	samples []xmaxSample // the primary's xmax over time, oldest first
	// poll is the cursor the latest successful poll returned, and when.
	poll struct {
		snapshot string
		at       time.Time
	}
	// check is the latest stall check's result (used with a standby).
	check struct {
		at   time.Time
		xmax uint64 // the primary's snapshot xmax then
		st   snapshot.Stall
		ok   bool
	}
}

type xmaxSample struct {
	at   time.Time
	xmax uint64
}

// maxXmaxSamples bounds the history: past it, samples are dropped so that
// the history keeps spanning minAge whatever the poll interval (a writer
// is then named a little later: see addLocked).
const maxXmaxSamples = 64

// answer returns the result of a stall check for cur without a statement,
// when cur is the latest poll's cursor and that poll already tells:
//
//   - on the primary, no xid in the poll's snapshot is below the xmax seen
//     minAge before it: no transaction can have been writing for minAge
//     (nothing to name), and what the cursor has not seen is what committed
//     since the poll (counted as 0: the next poll reads it);
//   - with a standby, the latest check found nothing held back, is less
//     than standbyStallKeepalive old, and the standby has since replayed
//     past the primary's xmax of that check: that result stands, with the
//     standby caught up.
//
// minAge ≤ 0 (name every open writer now) always needs the statement.
func (g *stallGate) answer(cur snapshot.Cursor, minAge time.Duration, standby bool, now time.Time) (snapshot.Stall, bool) {
	if minAge <= 0 || cur.PGSnapshot == "" {
		return snapshot.Stall{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur.PGSnapshot != g.poll.snapshot {
		return snapshot.Stall{}, false
	}
	snap, err := parseSnapshot(cur.PGSnapshot)
	if err != nil {
		return snapshot.Stall{}, false
	}
	if !standby {
		gate := g.beforeLocked(g.poll.at, minAge)
		for x := range strings.SplitSeq(snapshotXip(cur.PGSnapshot), ",") {
			if v, err := strconv.ParseUint(x, 10, 64); x != "" && (err != nil || v < gate) {
				return snapshot.Stall{}, false
			}
		}
		return snapshot.Stall{}, true
	}
	c := g.check
	if !c.ok || !quiet(c.st) || now.Sub(c.at) >= standbyStallKeepalive || snap.xmax < c.xmax {
		return snapshot.Stall{}, false
	}
	return snapshot.Stall{Standby: &snapshot.Standby{}}, true
}

// quiet reports whether a check found nothing held back: no entry
// pending, no blocker, the standby (if any) asked, replaying, not
// promoted. Replay lag without pending entries is not a stall.
func quiet(st snapshot.Stall) bool {
	return st.Pending == 0 && len(st.Blockers) == 0 &&
		(st.Standby == nil || (st.Standby.Error == "" && !st.Standby.ReplayPaused && !st.Standby.Promoted))
}

// snapshotXip returns the in-progress list of a textual pg_snapshot.
func snapshotXip(s string) string {
	_, rest, _ := strings.Cut(s, ":")
	_, xip, _ := strings.Cut(rest, ":")
	return xip
}

// polled records a successful poll's cursor; onPrimary adds its xmax to
// the history.
func (g *stallGate) polled(at time.Time, c snapshot.Cursor, onPrimary bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.poll.snapshot, g.poll.at = c.PGSnapshot, at
	if !onPrimary {
		return // a standby's xmax says nothing about the primary's xids
	}
	if snap, err := parseSnapshot(c.PGSnapshot); err == nil {
		g.addLocked(at, snap.xmax)
	}
}

// checked records a stall check: the primary's xmax it saw, and its result.
func (g *stallGate) checked(at time.Time, xmax string, st snapshot.Stall) {
	v, err := strconv.ParseUint(xmax, 10, 64)
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addLocked(at, v)
	g.check.at, g.check.xmax, g.check.st, g.check.ok = at, v, st, true
}

// before returns the xmax seen by the newest poll or check at least minAge
// before now ("0" when none is that old: nothing can be named yet).
func (g *stallGate) before(now time.Time, minAge time.Duration) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strconv.FormatUint(g.beforeLocked(now, minAge), 10)
}

func (g *stallGate) beforeLocked(now time.Time, minAge time.Duration) uint64 {
	var x uint64
	for _, s := range g.samples {
		if s.at.After(now.Add(-minAge)) {
			break
		}
		x = s.xmax
	}
	return x
}

func (g *stallGate) addLocked(at time.Time, xmax uint64) {
	g.samples = append(g.samples, xmaxSample{at, xmax})
	n := len(g.samples)
	if n <= maxXmaxSamples {
		return
	}
	// Drop the sample whose loss leaves the smallest hole for its age, so
	// that the samples thin out geometrically with age: the newest one at
	// least minAge old is at most a fraction of minAge older than that.
	drop, best := 1, math.Inf(1)
	for i := 1; i < n-1; i++ {
		age := at.Sub(g.samples[i].at).Seconds()
		hole := g.samples[i+1].at.Sub(g.samples[i-1].at).Seconds()
		if r := hole / max(age, 1e-9); r < best {
			drop, best = i, r
		}
	}
	g.samples = append(g.samples[:drop], g.samples[drop+1:]...)
}
