package postgres

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/internal/testdb"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// queryCounter is a pgx tracer counting the queries sent.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}
func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// writeCounter counts the writes (one per round trip) on the pool's sockets.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w writeCounter) Write(b []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(b)
}

func newTracedPG(t *testing.T) (*Store, *queryCounter, *atomic.Int64) {
	t.Helper()
	url := testdb.New(t)
	qc, writes := &queryCounter{}, &atomic.Int64{}
	p, err := newPG(url, snapshot.OpenOptions{MaxConns: 1}, func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = qc
		var d net.Dialer
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return writeCounter{conn, writes}, nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p, qc, writes
}

func TestIdlePollIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, qc, writes := newTracedPG(t)
	_, c, err := p.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, c, err = p.Poll(ctx, c); err != nil { // warm: prepares the statement
		t.Fatal(err)
	}
	qc.n.Store(0)
	writes.Store(0)
	const polls = 10
	for range polls {
		addrs, next, err := p.Poll(ctx, c)
		if err != nil || len(addrs) != 0 {
			t.Fatalf("idle poll = %v, %v", addrs, err)
		}
		c = next
	}
	if q, w := qc.n.Load(), writes.Load(); q != polls || w != polls {
		t.Fatalf("%d idle polls made %d queries and %d round trips, want %d each", polls, q, w, polls)
	}
}

// TestPollPlanUsesIndexOnly fills the journal, analyzes it and checks that
// the poll's plan (custom and generic) reads the journal through the xid
// index, never with a sequential scan.
func TestPollPlanUsesIndexOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _, _ := newTracedPG(t)
	const n = 200_000
	fill := fmt.Sprintf(`INSERT INTO sys_reconcile_journal (xid, source, key, op)
SELECT (3 + (g::numeric * (x.base - 4) / %d)::bigint)::text::xid8, 'sys_metadata', 'k' || g, 'insert'
FROM generate_series(1, %d) g, (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS base) x`, n, n)
	for _, q := range []string{fill, "VACUUM ANALYZE sys_reconcile_journal"} {
		if _, err := p.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_, c, err := p.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('x', 'object', 'x', '{}')`); err != nil {
		t.Fatal(err)
	}
	custom, generic := pollPlans(t, p, c.PGSnapshot)
	for name, pl := range map[string]string{"custom": custom, "generic": generic} {
		if strings.Contains(pl, "Seq Scan on sys_reconcile_journal") || !strings.Contains(pl, "sys_reconcile_journal_xid") {
			t.Errorf("%s plan of the poll scans the journal without its xid index:\n%s", name, pl)
		}
	}
	t.Logf("custom plan:\n%s", custom)
}

// TestPollPlanProbesInProgressXids: a previous snapshot listing
// transactions in progress (in a fleet, other replicas' heartbeats) is
// looked up in the xid index, not by reading the journal, even when the
// statistics make every entry match (a journal written by one bulk load).
func TestPollPlanProbesInProgressXids(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _, _ := newTracedPG(t)
	for _, q := range []string{`INSERT INTO sys_metadata (id, type, name, metadata)
SELECT 'm' || g, 'object', 'n' || g, '{}' FROM generate_series(1, 1000) g`, "VACUUM ANALYZE sys_reconcile_journal"} {
		if _, err := p.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var xmax uint64
	if err := p.pool.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&xmax); err != nil {
		t.Fatal(err)
	}
	prev := fmt.Sprintf("%d:%d:%d,%d", xmax-3, xmax, xmax-3, xmax-1)
	custom, generic := pollPlans(t, p, prev)
	for name, pl := range map[string]string{"custom": custom, "generic": generic} {
		if strings.Contains(pl, "Seq Scan on sys_reconcile_journal") {
			t.Errorf("%s plan of the poll reads the whole journal for the in-progress xids:\n%s", name, pl)
		}
	}
	t.Logf("generic plan:\n%s", generic)
}

// pollPlans returns the custom and the generic plans of the poll
// function's two statements (prev listing no transaction in progress, and
// listing some) for the previous snapshot prev, as the function's plan
// cache makes them (custom plans first, then generic), one after the
// other.
func pollPlans(t *testing.T, p *Store, prev string) (custom, generic string) {
	t.Helper()
	ctx := context.Background()
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	plan := func(q string, args ...any) string { return planOf(t, conn, q, args...) }
	var src string
	if err := conn.QueryRow(ctx, "SELECT prosrc FROM pg_proc WHERE proname = 'sys_reconciler_poll_since'").Scan(&src); err != nil {
		t.Fatal(err)
	}
	// Each statement, its PL/pgSQL variables made a parameter and calls.
	_, quiet, _ := strings.Cut(src, "in progress.\n")
	quiet, busy, _ := strings.Cut(quiet, "\n  ELSE\n")
	busy, _, _ = strings.Cut(busy, "\n  END IF")
	params := strings.NewReplacer("INTO res", "", "prev::pg_snapshot", "$1::text::pg_snapshot", "(p)", "($1::text::pg_snapshot)",
		"cur)", "pg_current_snapshot())", "ARRAY[snap,", "ARRAY[pg_current_snapshot()::text,", ";", "")
	for i, body := range []string{quiet, busy} {
		body = params.Replace(body)
		custom += plan("EXPLAIN "+body, prev) + "\n"
		name := fmt.Sprintf("poll_plan_%d", i)
		if _, err := conn.Exec(ctx, "PREPARE "+name+"(text) AS "+body); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		generic += plan("EXPLAIN EXECUTE "+name+"('"+prev+"')") + "\n"
		if _, err := conn.Exec(ctx, "DEALLOCATE "+name+"; RESET plan_cache_mode"); err != nil {
			t.Fatal(err)
		}
	}
	return custom, generic
}

// TestPollSinceUnchangedSnapshot: the poll function answers NULL (nothing
// changed) for the snapshot its own statement runs in, and the entries
// otherwise.
func TestPollSinceUnchangedSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _, _ := newTracedPG(t)
	var (
		before string
		res    []string
	)
	if err := p.pool.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := p.pool.QueryRow(ctx, "SELECT sys_reconciler_poll_since(pg_current_snapshot()::text)").Scan(&res); err != nil || res != nil {
		t.Fatalf("poll at the statement's own snapshot = %q, %v; want NULL", res, err)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('x', 'object', 'x', '{}')`); err != nil {
		t.Fatal(err)
	}
	if err := p.pool.QueryRow(ctx, "SELECT sys_reconciler_poll_since($1)", before).Scan(&res); err != nil {
		t.Fatal(err)
	}
	if len(res) != 6 || res[4] != "sys_metadata" || res[5] != "x" {
		t.Fatalf("poll after an insert = %q, want {snap, store, pruned, head, sys_metadata, x}", res)
	}
}

// TestReadPlanUsesIndexes: reading a few addresses among many rows finds
// the rows and their revisions through the primary keys, never by scanning
// a table.
func TestReadPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _, _ := newTracedPG(t)
	const n = 5_000
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO sys_metadata (id, type, name, metadata) SELECT 'm' || g, 'object', 'o' || g, '{}' FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO sys_secret (id, ciphertext) SELECT 's' || g, 'c' FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO sys_connector_credential (ref, value) SELECT 'c' || g, 'v' FROM generate_series(1, %d) g`, n),
		"ANALYZE",
	} {
		if _, err := p.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, c := range []struct{ query, key string }{
		{snapshot.SelectBody(pgSelectMetadata, "octet_length(m.metadata)", 1<<20, 64<<20) + " WHERE m.id = ANY($1) ORDER BY m.id", "m"},
		{pgSelectSecret + " WHERE s.id = ANY($1) ORDER BY s.id", "s"},
		{pgSelectCredential + " WHERE c.ref = ANY($1) ORDER BY c.ref", "c"},
	} {
		plan := planOf(t, p.pool, "EXPLAIN "+c.query, []string{c.key + "1", c.key + "77", c.key + "4999"})
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "sys_reconciler_revision_pkey") {
			t.Errorf("plan of a read scans a table:\n%s", plan)
		}
		t.Logf("%s", plan)
	}
}

// planOf runs an EXPLAIN statement on q and returns the plan's text.
func planOf(t *testing.T, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, explain string, args ...any) string {
	t.Helper()
	rows, err := q.Query(context.Background(), explain, args...)
	if err != nil {
		t.Fatalf("%s: %v", explain, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestRelistPlanStreams: a relist's metadata select is a merge join of
// index scans, sorting and materializing nothing: its first row comes
// without reading every revision first.
func TestRelistPlanStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _, _ := newTracedPG(t)
	for _, q := range []string{
		`INSERT INTO sys_metadata (id, type, name, metadata) SELECT 'm' || g, 'object', 'o' || g, '{}' FROM generate_series(1, 5000) g`,
		"ANALYZE",
	} {
		if _, err := p.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	plan := planOf(t, p.pool, "EXPLAIN "+p.relistMetadata)
	if !strings.Contains(plan, "Merge Left Join") || strings.Contains(plan, "Sort") || strings.Contains(plan, "Materialize") ||
		!strings.Contains(plan, "sys_metadata_pkey") || !strings.Contains(plan, "sys_reconciler_revision_pkey") {
		t.Errorf("relist plan sorts or scans a table:\n%s", plan)
	}
	t.Logf("%s", plan)
}

func TestListenReconnects(t *testing.T) {
	t.Parallel()
	p, _, _ := newTracedPG(t)
	ctx, cancel := context.WithCancel(context.Background())
	wakes := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- p.Listen(ctx, func() {
			select {
			case wakes <- struct{}{}:
			default:
			}
		})
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(30 * time.Second):
			t.Fatalf("no wake after %s", what)
		}
	}
	wait("connect")
	if _, err := p.pool.Exec(ctx, `INSERT INTO sys_connector_credential (ref, value) VALUES ('a', 'b')`); err != nil {
		t.Fatal(err)
	}
	wait("insert")
	// Cut the listener's connection: it reconnects and wakes by itself.
	if _, err := p.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = 'LISTEN reconciler'`); err != nil {
		t.Fatal(err)
	}
	wait("reconnect")
	if _, err := p.pool.Exec(ctx, `UPDATE sys_connector_credential SET value = NULL`); err != nil {
		t.Fatal(err)
	}
	wait("update")
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Listen returned %v, want context.Canceled", err)
	}
}
