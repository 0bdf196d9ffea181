package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// standby is the hot standby that polls, relists and reads go to.
//
// A standby's pg_current_snapshot() has the right xmin and xmax but an
// empty in-progress list (during recovery PostgreSQL keeps every running
// xid in the snapshot's subtransaction array, which pg_snapshot leaves
// out). A late commit below the previous xmax would be skipped by the
// primary's poll. So a cursor taken on a standby records instead the
// journal xids at or above its xmin that it saw (Cursor.Seen), and a poll
// returns the visible entries at or above the previous xmin whose xid was
// not seen. Visibility is the statement's own snapshot (MVCC), the same
// one pg_current_snapshot() returns. The list stays short: it holds only
// transactions that changed a source row since the oldest transaction
// still open.
type standby struct {
	pool *pgxpool.Pool
	url  string   // redacted
	pw   []string // secrets of the read URL, for scrubbing
	// floor is the highest xmax of a cursor this store returned: a relist
	// on a standby that went back (restarted from an earlier restart
	// point, or another standby behind a balancer) must not move the
	// cursor backwards.
	floor atomic.Uint64
	// behind is set while the standby is behind the cursor (logged once).
	behind atomic.Bool
}

// standbyError maps a driver error of the standby (naming its URL).
func (p *Store) standbyError(op string, err error) error {
	return (&Store{url: p.standby.url, pw: p.standby.pw}).interpretError(op, err)
}

// seenList splits a cursor's Seen for a text[] parameter.
func seenList(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// standbyPollSQL is the poll on a standby in one statement: the function
// sys_reconciler_poll_standby returns the visible entries at or above the
// previous xmin ($1) whose xid the previous cursor did not see ($2), the
// xids the new cursor sees, and what detects an expired or regressed
// cursor. Both reads are ranges of the (xid) INCLUDE (source, key, seq)
// index.
const standbyPollSQL = `SELECT * FROM sys_reconciler_poll_standby($1, $2)`

func (p *Store) pollStandby(ctx context.Context, cur snapshot.Cursor) ([]snapshot.Address, snapshot.Cursor, error) {
	prev, err := parseSnapshot(cur.PGSnapshot)
	if err != nil {
		return nil, cur, fmt.Errorf("poll %s: %w: %v", p.standby.url, snapshot.ErrCursorRegressed, err)
	}
	var (
		snap, storeID, prunedXid string
		head                     int64
		at                       time.Time
		sources, keys, seen      []string
	)
	err = p.standby.pool.QueryRow(ctx, standbyPollSQL, strconv.FormatUint(prev.xmin, 10), seenList(cur.Seen)).
		Scan(&snap, &storeID, &prunedXid, &head, &at, &sources, &keys, &seen)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, cur, fmt.Errorf("poll %s: %w: no sys_reconciler_state row", p.standby.url, snapshot.ErrSchema)
	}
	if err != nil {
		return nil, cur, p.standbyError("poll", err)
	}
	now, err := parseSnapshot(snap)
	if err != nil {
		return nil, cur, fmt.Errorf("poll %s: %v", p.standby.url, err)
	}
	pruned, _ := strconv.ParseUint(prunedXid, 10, 64)
	switch {
	case storeID != cur.StoreID:
		return nil, cur, fmt.Errorf("poll %s: %w: store id %s, cursor's %s", p.standby.url, snapshot.ErrCursorRegressed, storeID, cur.StoreID)
	case prev.xmax > now.xmax || cur.Seq > head:
		if err := p.standbyBehind(ctx, prev.xmax, now.xmax); err != nil {
			return nil, cur, err
		}
		return nil, cur, nil // wait for replay: the cursor never moves back
	case pruned != 0 && pruned >= prev.xmin:
		return nil, cur, fmt.Errorf("poll %s: %w: pruned up to xid %d, cursor %s", p.standby.url, snapshot.ErrCursorExpired, pruned, cur)
	}
	p.caughtUp(ctx, now.xmax)
	addrs := make([]snapshot.Address, len(sources))
	for i := range sources {
		addrs[i] = snapshot.Address{Table: snapshot.Table(sources[i]), Key: keys[i]}
	}
	next := snapshot.Cursor{StoreID: storeID, Seq: max(head, cur.Seq), PGSnapshot: snap, Seen: strings.Join(seen, ","), At: at}
	p.stallGate.polled(time.Now(), next, false)
	return addrs, next, nil
}

// standbyBehind decides what a standby that is behind the cursor (xmax
// below want) means. When the primary is ahead of want, the standby is
// lagging: nil, and the caller waits for replay. When the primary is
// behind too, the store went backwards: ErrCursorRegressed. When the
// primary cannot be asked, the standby is taken as lagging (waiting is
// safe; a relist on an older view would undo applied changes).
func (p *Store) standbyBehind(ctx context.Context, want, have uint64) error {
	var snap string
	err := p.pool.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&snap)
	primary, perr := parseSnapshot(snap)
	if err == nil && perr == nil && primary.xmax < want {
		return fmt.Errorf("poll %s: %w: primary's snapshot xmax %d behind cursor's %d", p.url, snapshot.ErrCursorRegressed, primary.xmax, want)
	}
	if p.standby.behind.CompareAndSwap(false, true) {
		p.log.WarnContext(ctx, "standby behind the cursor: waiting for it to replay",
			slog.String("standby", p.standby.url), slog.Uint64("standby_xmax", have), slog.Uint64("cursor_xmax", want))
	}
	return nil
}

// caughtUp records that the standby reached xmax.
func (p *Store) caughtUp(ctx context.Context, xmax uint64) {
	for {
		f := p.standby.floor.Load()
		if xmax <= f || p.standby.floor.CompareAndSwap(f, xmax) {
			break
		}
	}
	if p.standby.behind.CompareAndSwap(true, false) {
		p.log.InfoContext(ctx, "standby caught up with the cursor", slog.String("standby", p.standby.url))
	}
}

// relistStandby is Relist on the standby: one REPEATABLE READ, read-only
// transaction whose snapshot is the cursor, with the journal xids it sees.
// A standby behind a cursor this store already returned is an error
// (ErrUnavailable): relisting there would move the cursor backwards.
func (p *Store) relistStandby(ctx context.Context, batch func(offset int, rows []snapshot.MetadataRow)) (snapshot.Rows, snapshot.Cursor, error) {
	var seen []string
	rows, c, err := p.relistIn(ctx, p.standby.pool, p.standby.url, &seen, p.standbyError, batch)
	if err != nil {
		return snapshot.Rows{}, snapshot.Cursor{}, err
	}
	c.Seen = strings.Join(seen, ",")
	snap, err := parseSnapshot(c.PGSnapshot)
	if err != nil {
		return snapshot.Rows{}, snapshot.Cursor{}, fmt.Errorf("relist %s: %v", p.standby.url, err)
	}
	if floor := p.standby.floor.Load(); snap.xmax < floor {
		if err := p.standbyBehind(ctx, floor, snap.xmax); err != nil {
			p.standby.floor.Store(0) // the store itself went back: start over
		} else {
			return snapshot.Rows{}, snapshot.Cursor{}, fmt.Errorf("relist %s: %w: standby replayed up to xmax %d, behind the cursor's %d: waiting for replay",
				p.standby.url, snapshot.ErrUnavailable, snap.xmax, floor)
		}
	}
	p.caughtUp(ctx, snap.xmax)
	return rows, c, nil
}

// CheckStandby verifies, when the store has a read URL, that it is a hot
// standby of the store: in recovery, of the same cluster (system
// identifier) and holding the same store id. Errors wrap ErrNotStandby
// (or ErrUnavailable, ErrSchema) and name the read URL, redacted.
func (p *Store) CheckStandby(ctx context.Context) error {
	if p.standby == nil {
		return nil
	}
	const who = "SELECT (SELECT system_identifier FROM pg_control_system())::text, pg_is_in_recovery()"
	const store = "SELECT store_id FROM sys_reconciler_state WHERE id = 1"
	var (
		sysP, sysS, storeP, storeS string
		recP, recS                 bool
	)
	if err := p.pool.QueryRow(ctx, who).Scan(&sysP, &recP); err != nil {
		return p.interpretError("check store", err)
	}
	if err := p.standby.pool.QueryRow(ctx, who).Scan(&sysS, &recS); err != nil {
		return p.standbyError("check standby", err)
	}
	u := p.standby.url
	switch {
	case !recS:
		return fmt.Errorf("%s: %w: it is a primary (not in recovery); want a hot standby of %s", u, snapshot.ErrNotStandby, p.url)
	case sysS != sysP:
		return fmt.Errorf("%s: %w: it is a standby of another cluster (system identifier %s, the store's %s)", u, snapshot.ErrNotStandby, sysS, sysP)
	}
	if err := p.pool.QueryRow(ctx, store).Scan(&storeP); err != nil {
		return p.interpretError("check store", err)
	}
	if err := p.standby.pool.QueryRow(ctx, store).Scan(&storeS); err != nil {
		return p.standbyError("check standby", err)
	}
	if storeS != storeP {
		return fmt.Errorf("%s: %w: it holds another store (store id %s, the store's %s): another database?", u, snapshot.ErrNotStandby, storeS, storeP)
	}
	return nil
}

// standbyState asks the standby how far its replay is behind primaryLSN
// (the primary's current WAL position). It never fails: a standby that
// cannot be asked is reported with the error.
func (p *Store) standbyState(ctx context.Context, primaryLSN string) *snapshot.Standby {
	st := &snapshot.Standby{}
	var (
		inRecovery, paused bool
		replayLSN          *string
		lagSec             *float64
	)
	err := p.standby.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(),
  CASE WHEN pg_is_in_recovery() THEN pg_is_wal_replay_paused() ELSE false END,
  pg_last_wal_replay_lsn()::text,
  extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8`).Scan(&inRecovery, &paused, &replayLSN, &lagSec)
	if err != nil {
		st.Error = p.standbyError("standby state", err).Error()
		return st
	}
	st.Promoted, st.ReplayPaused = !inRecovery, paused
	if !inRecovery || replayLSN == nil {
		return st
	}
	behind := lsnDiff(primaryLSN, *replayLSN)
	if behind > 0 {
		st.ReplayLagBytes = behind
		if lagSec != nil && *lagSec > 0 {
			st.ReplayLag = time.Duration(*lagSec * float64(time.Second))
		}
	}
	return st
}

// lsnDiff returns a - b in bytes for textual LSNs "X/Y" (0 when either
// does not parse).
func lsnDiff(a, b string) int64 {
	pa, ok1 := parseLSN(a)
	pb, ok2 := parseLSN(b)
	if !ok1 || !ok2 {
		return 0
	}
	return int64(pa) - int64(pb)
}

func parseLSN(s string) (uint64, bool) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, false
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return h<<32 | l, true
}
