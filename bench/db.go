package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/snapshot"
	_ "github.com/objectstack-fleet/reconciler/snapshot/backends" // the stores the benchmarks open
)

// benchDB is one migrated, seeded database of the bench run.
type benchDB struct {
	name string
	url  string
	rows int
}

// withDatabase returns admin with its database replaced by name.
func withDatabase(admin, name string) (string, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("parse admin url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// createDB (re)creates database name, migrates it and seeds rows metadata
// items, a few credentials and datasources.
func createDB(ctx context.Context, admin, name string, rows int) (*benchDB, error) {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("connect admin: %w", err)
	}
	defer c.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return nil, fmt.Errorf("drop %s: %w", name, err)
	}
	if _, err := c.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	u, err := withDatabase(admin, name)
	if err != nil {
		return nil, err
	}
	s, err := snapshot.Open(u, snapshot.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	db := &benchDB{name: name, url: u, rows: rows}
	if err := db.seed(ctx, rows); err != nil {
		return nil, err
	}
	return db, nil
}

// seed inserts n sys_metadata rows (objects with three fields, one a lookup
// to another object, as in reconcile's own benchmark), 10 credentials and 10
// inactive datasources (sys_metadata records), in batches so that 1M rows do not make one huge transaction.
func (db *benchDB) seed(ctx context.Context, n int) error {
	c, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	const batch = 100_000
	for lo := 1; lo <= n; lo += batch {
		hi := min(lo+batch-1, n)
		_, err := c.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, metadata)
SELECT 'o' || x, 'object', 'obj' || x,
  ('{"label":"Object ' || x || '","fields":{"name":{"type":"text"},"amount":{"type":"currency"},"parent":{"type":"lookup","reference":"obj' || ((x % 100) + 1) || '"}}}')::jsonb
FROM generate_series($1::int, $2::int) x`, lo, hi)
		if err != nil {
			return fmt.Errorf("seed %s rows %d-%d: %w", db.name, lo, hi, err)
		}
	}
	if _, err := c.Exec(ctx, `INSERT INTO sys_connector_credential (ref, value)
SELECT 'cred' || x, 'secret-' || x FROM generate_series(1, 10) x`); err != nil {
		return fmt.Errorf("seed credentials: %w", err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, metadata)
SELECT 'ds' || x, 'datasource', 'ds' || x,
  '{"name":"ds' || x || '","driver":"sqlite","config":{"path":"ds' || x || '.db"},"active":false}'
FROM generate_series(1, 10) x`); err != nil {
		return fmt.Errorf("seed datasources: %w", err)
	}
	for _, q := range []string{"VACUUM ANALYZE", "CHECKPOINT"} {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// drop removes the database.
func dropDB(ctx context.Context, admin, name string) error {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// stmtStats is pg_stat_statements' view of one database at one instant.
type stmtStats map[int64]stmtStat

type stmtStat struct {
	query string
	calls int64
	ms    float64
	rows  int64
}

// statsDelta sums after−before over the statements whose text matches keep.
type statsDelta struct {
	Calls int64
	MS    float64
	Rows  int64
}

// pgss reads pg_stat_statements of the bench database; ok is false when
// the extension is not loaded (shared_preload_libraries).
type pgss struct {
	conn *pgx.Conn
	dbid uint32
	ok   bool
}

func openPGSS(ctx context.Context, db *benchDB) (*pgss, error) {
	c, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return nil, err
	}
	p := &pgss{conn: c}
	var libs string
	if err := c.QueryRow(ctx, "SHOW shared_preload_libraries").Scan(&libs); err != nil {
		c.Close(ctx)
		return nil, err
	}
	if !strings.Contains(libs, "pg_stat_statements") {
		return p, nil
	}
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("create extension pg_stat_statements: %w", err)
	}
	if err := c.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = current_database()").Scan(&p.dbid); err != nil {
		c.Close(ctx)
		return nil, err
	}
	p.ok = true
	return p, nil
}

func (p *pgss) close() { p.conn.Close(context.Background()) }

func (p *pgss) snap(ctx context.Context) (stmtStats, error) {
	out := stmtStats{}
	if !p.ok {
		return out, nil
	}
	rows, err := p.conn.Query(ctx, `SELECT queryid, query, calls, total_exec_time, rows
FROM pg_stat_statements WHERE dbid = $1 AND query NOT LIKE '%pg_stat_statements%'`, p.dbid)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var s stmtStat
		if err := rows.Scan(&id, &s.query, &s.calls, &s.ms, &s.rows); err != nil {
			return nil, err
		}
		out[id] = s
	}
	return out, rows.Err()
}

func diffStats(before, after stmtStats, keep func(query string) bool) statsDelta {
	var d statsDelta
	for id, a := range after {
		if keep != nil && !keep(a.query) {
			continue
		}
		b := before[id]
		d.Calls += a.calls - b.calls
		d.MS += a.ms - b.ms
		d.Rows += a.rows - b.rows
	}
	return d
}

// serverCPU reads the CPU time used so far by every process of the
// PostgreSQL cluster (the postmaster and its children) from /proc. It works
// only when the server runs on this machine.
type serverCPU struct{ postmaster int }

func findPostmaster(ctx context.Context, admin string) (serverCPU, error) {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return serverCPU{}, err
	}
	defer c.Close(ctx)
	var pid int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return serverCPU{}, err
	}
	st, err := readStat(pid)
	if err != nil {
		return serverCPU{}, fmt.Errorf("server process %d not visible in /proc (is PostgreSQL on this machine?): %w", pid, err)
	}
	return serverCPU{postmaster: st.ppid}, nil
}

type procStat struct {
	ppid       int
	utime, stm int64 // clock ticks
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("bad stat of %d", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is state (field 3); ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("short stat of %d", pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stm, _ := strconv.ParseInt(f[12], 10, 64)
	return procStat{ppid: ppid, utime: ut, stm: stm}, nil
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

// total returns the cluster's CPU time (postmaster + children) per pid.
func (s serverCPU) total() map[int]time.Duration {
	out := map[int]time.Duration{}
	family(s.postmaster, func(pid int, st procStat) { out[pid] = time.Duration(st.utime+st.stm) * clockTick })
	return out
}

// family calls fn for root and each of its children alive now, with their
// /proc stat.
func family(root int, fn func(pid int, st procStat)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || (pid != root && st.ppid != root) {
			continue
		}
		fn(pid, st)
	}
}

// cpuDelta is the CPU the cluster used between two total() readings;
// processes born in between count from zero.
func cpuDelta(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, a := range after {
		d += a - before[pid]
	}
	return d
}
