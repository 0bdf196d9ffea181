package snapshot

import (
	"context"
	"sync"
	"time"
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

// Stall implements Source in one statement on the primary (and, with a
// standby, one more there for its replay state).
func (p *PG) Stall(ctx context.Context, cur Cursor, minAge time.Duration) (Stall, error) {
	var st Stall
	snap := cur.Snapshot
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
		return Stall{}, p.interpretError("stall", err)
	}
	p.stallGate.record(checked, xmax)
	for i := range pids {
		st.Blockers = append(st.Blockers, Blocker{PID: int(pids[i]), XactAge: time.Duration(ages[i] * float64(time.Second)),
			State: states[i], App: apps[i]})
	}
	if p.standby != nil {
		st.Standby = p.standbyState(ctx, lsn)
	}
	return st, nil
}

// xmaxHistory remembers when past stall checks saw which snapshot xmax,
// so that a check knows which xids were already assigned minAge ago: only
// a transaction holding one of those can have been writing for minAge.
type xmaxHistory struct {
	mu      sync.Mutex
	samples []xmaxSample // oldest first
}

type xmaxSample struct {
	at   time.Time
	xmax string
}

// maxXmaxSamples bounds the history (a stall check runs every few polls).
const maxXmaxSamples = 64

// before returns the xmax seen by the newest check at least minAge before
// now ("0" when none is that old: nothing can be named yet).
func (h *xmaxHistory) before(now time.Time, minAge time.Duration) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := "0"
	for _, s := range h.samples {
		if s.at.After(now.Add(-minAge)) {
			break
		}
		x = s.xmax
	}
	return x
}

// record adds what a check saw.
func (h *xmaxHistory) record(at time.Time, xmax string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, xmaxSample{at, xmax})
	if len(h.samples) > maxXmaxSamples {
		h.samples = append(h.samples[:0], h.samples[len(h.samples)-maxXmaxSamples:]...)
	}
}
