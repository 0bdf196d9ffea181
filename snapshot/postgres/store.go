package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/secret"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Store is the PostgreSQL store. Its cursor is a pg_snapshot: the xid bounds
// and in-progress list of the last poll.
type Store struct {
	pool *pgxpool.Pool
	url  string   // redacted
	pw   []string // the URL's secrets, for scrubbing driver messages only
	log  *slog.Logger

	// standby is set when polls, relists and reads go to a hot standby
	// (store.read_url); nil otherwise.
	standby *standby
	// stallGate remembers what past polls and stall checks saw.
	stallGate stallGate
	// storeID is the store id this store's last relist or changed poll
	// read (a string): a poll that finds the cursor's snapshot unchanged
	// trusts the cursor's store id only when it is this one.
	storeID atomic.Value
	// selMetadata selects metadata rows, bodies above the cap withheld;
	// relistMetadata selects the active ones for a relist.
	selMetadata, relistMetadata string
}

var (
	_ snapshot.Store            = (*Store)(nil)
	_ snapshot.Hinter           = (*Store)(nil)
	_ snapshot.Catalog          = (*Store)(nil)
	_ snapshot.CredentialOwners = (*Store)(nil)

	_ snapshot.StandbyChecker     = (*Store)(nil)
	_ snapshot.PlatformChecker    = (*Store)(nil)
	_ snapshot.EncryptionReporter = (*Store)(nil)
)

//go:embed migrations
var pgMigrations embed.FS

// pgSchema is the PostgreSQL store's migrations.
var pgSchema = snapshot.NewSchema("postgres", pgMigrations, "migrations")

func init() {
	snapshot.Register(snapshot.Backend{
		Kind:     "postgres",
		Schemes:  []string{"postgres", "postgresql"},
		Form:     "postgres://…",
		CheckURL: checkPGURL,
		Standby:  true,
		Schema:   pgSchema,
		Open: func(rawURL string, opts snapshot.OpenOptions) (snapshot.Store, error) {
			p, err := newPG(rawURL, opts, nil)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
	})
}

// checkPGURL is store.url's check of a PostgreSQL URL: it parses.
func checkPGURL(s string) error {
	if _, err := url.Parse(s); err != nil {
		return fmt.Errorf("malformed postgres URL %q", redact.URL(s))
	}
	return nil
}

// Advisory lock keys (arbitrary, fixed).
const (
	lockMigrate = 7741101
	lockPrune   = 7741102
)

// hintChannel is the NOTIFY channel the triggers signal.
const hintChannel = "reconciler"

// newPG builds the pools without connecting. tweak lets in-package tests
// add a tracer.
func newPG(rawURL string, opts snapshot.OpenOptions, tweak func(*pgxpool.Config)) (*Store, error) {
	pool, err := newPool(rawURL, opts, tweak)
	if err != nil {
		return nil, err
	}
	p := &Store{pool: pool, url: redact.URL(rawURL), pw: redact.URLSecrets(rawURL), log: opts.Log(),
		selMetadata:    snapshot.SelectBody(pgSelectMetadata, "octet_length(m.metadata)", opts.MaxBodyBytes, opts.MaxTotalBytes),
		relistMetadata: snapshot.SelectBody(pgRelistMetadata, "octet_length(m.metadata)", opts.MaxBodyBytes, opts.MaxTotalBytes)}
	if opts.ReadURL != "" {
		read, err := newPool(opts.ReadURL, opts, tweak)
		if err != nil {
			pool.Close()
			return nil, err
		}
		p.standby = &standby{pool: read, url: redact.URL(opts.ReadURL), pw: redact.URLSecrets(opts.ReadURL)}
	}
	return p, nil
}

// newPool builds one pool with the store's connection settings.
func newPool(rawURL string, opts snapshot.OpenOptions, tweak func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	pw := redact.URLSecrets(rawURL)
	if _, err := url.Parse(rawURL); err != nil {
		return nil, snapshot.BadURL(rawURL, redact.Secrets(unwrapURLError(err), pw...))
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, snapshot.BadURL(rawURL, redact.Secrets(err.Error(), pw...))
	}
	cfg.MaxConns = 4
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.MinConns = 0
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "reconciler"
	}
	boundWaits(cfg.ConnConfig)
	// The pool's default pings a connection idle for over a second before
	// lending it: a second round trip on every idle poll. Ping only long-idle
	// ones; a connection broken meanwhile fails one call and is replaced.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > time.Minute }
	if tweak != nil {
		tweak(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, snapshot.BadURL(rawURL, redact.Secrets(err.Error(), pw...))
	}
	return pool, nil
}

func unwrapURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// Kind implements Store.
func (p *Store) Kind() string { return "postgres" }

// Close implements Store.
func (p *Store) Close() {
	p.pool.Close()
	if p.standby != nil {
		p.standby.pool.Close()
	}
}

// interpretError maps a pgx error to the package's sentinels; it is the only
// place that looks at pgx error types.
func (p *Store) interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &snapshot.StoreError{Op: op, URL: p.url, Msg: redact.Secrets(err.Error(), p.pw...)}
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &pgErr):
		e.Msg = redact.Secrets(fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code), p.pw...)
		switch code := pgErr.Code; {
		case code == pgerrcode.UndefinedTable, code == pgerrcode.UndefinedFunction,
			code == pgerrcode.UndefinedColumn, code == pgerrcode.InvalidSchemaName:
			e.Sentinel = snapshot.ErrSchema
			e.Msg += ": run `reconciler migrate`"
		case pgerrcode.IsConnectionException(code), pgerrcode.IsInvalidAuthorizationSpecification(code),
			pgerrcode.IsInsufficientResources(code), code == pgerrcode.InvalidCatalogName,
			code == pgerrcode.AdminShutdown, code == pgerrcode.CrashShutdown, code == pgerrcode.CannotConnectNow,
			code == pgerrcode.DatabaseDropped, code == pgerrcode.IdleSessionTimeout:
			e.Sentinel = snapshot.ErrUnavailable
		}
	case errors.Is(err, context.Canceled):
		e.Cause = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		e.Sentinel, e.Cause = snapshot.ErrUnavailable, context.DeadlineExceeded
	case errors.As(err, &connErr), errors.As(err, &netErr), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		pgconn.SafeToRetry(err), strings.Contains(err.Error(), "closed pool"):
		e.Sentinel = snapshot.ErrUnavailable
	}
	return e
}

// Ping implements Store.
func (p *Store) Ping(ctx context.Context) error {
	return p.interpretError("ping", p.pool.Ping(ctx))
}

// Migrate implements Store: Schema.Migrate in one transaction under an
// advisory lock (so concurrent migrates and repeated runs are harmless).
func (p *Store) Migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockMigrate); err != nil {
			return err
		}
		return pgSchema.Migrate(ctx, pgMigrateTx{tx}, p.log)
	})
	return p.interpretError("migrate", err)
}

// AutoMigrates implements Store: a PostgreSQL store is shared and
// migrated only when asked (`reconciler migrate`, --migrate).
func (p *Store) AutoMigrates() bool { return false }

// pgMigrateTx is Migrate's transaction as Schema.Migrate uses it.
type pgMigrateTx struct{ tx pgx.Tx }

func (m pgMigrateTx) Applied(ctx context.Context) ([]int, error) {
	if _, err := m.tx.Exec(ctx, `SET LOCAL client_min_messages = warning;
CREATE TABLE IF NOT EXISTS sys_reconciler_schema (
  version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, err
	}
	rows, err := m.tx.Query(ctx, "SELECT version FROM sys_reconciler_schema")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// TableExists looks the table up on the search path.
func (m pgMigrateTx) TableExists(ctx context.Context, t snapshot.Table) (bool, error) {
	var exists bool
	err := m.tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", string(t)).Scan(&exists)
	return exists, err
}

func (m pgMigrateTx) Exec(ctx context.Context, script string) error {
	_, err := m.tx.Exec(ctx, script)
	return err
}

func (m pgMigrateTx) Record(ctx context.Context, version int, name string) error {
	_, err := m.tx.Exec(ctx, "INSERT INTO sys_reconciler_schema (version, name) VALUES ($1, $2)", version, name)
	return err
}

func (m pgMigrateTx) Backfill(ctx context.Context) (int64, error) {
	tag, err := m.tx.Exec(ctx, pgBackfill)
	return tag.RowsAffected(), err
}

// pgBackfill gives a revision to every source row that has none: rows
// written before the triggers existed (a platform database being adopted)
// or while they were disabled.
const pgBackfill = `INSERT INTO sys_reconciler_revision (source, key, revision, updated_at)
SELECT t.source, t.key, nextval('sys_reconcile_revision_seq'), clock_timestamp()
FROM (
  SELECT 'sys_metadata' AS source, id::text AS key FROM sys_metadata
  UNION ALL SELECT 'sys_secret', id::text FROM sys_secret
  UNION ALL SELECT 'sys_connector_credential', ref FROM sys_connector_credential
) t
WHERE NOT EXISTS (SELECT 1 FROM sys_reconciler_revision r WHERE r.source = t.source AND r.key = t.key)
ON CONFLICT (source, key) DO NOTHING`

// CheckSchema implements Store: the schema version, and the row triggers
// on the source tables (present and enabled: a source table re-created
// without them would change unseen).
func (p *Store) CheckSchema(ctx context.Context) error {
	want, err := pgSchema.Triggers()
	if err != nil {
		return err
	}
	var tables, names []string
	for _, tg := range want {
		tables, names = append(tables, tg.Table), append(names, tg.Name)
	}
	var (
		v       []int
		missing []string
	)
	err = p.pool.QueryRow(ctx, `SELECT ARRAY(SELECT version FROM sys_reconciler_schema),
  ARRAY(SELECT x.name || ' on ' || x.tbl FROM unnest($1::text[], $2::text[]) AS x(tbl, name)
    WHERE NOT EXISTS (SELECT 1 FROM pg_trigger g
      WHERE g.tgrelid = to_regclass(x.tbl) AND g.tgname = x.name AND g.tgenabled <> 'D'))`, tables, names).Scan(&v, &missing)
	if err != nil {
		return p.interpretError("check schema", err)
	}
	if err := pgSchema.CheckVersions(p.url, v); err != nil {
		return err
	}
	return snapshot.CheckTriggers(p.url, missing)
}

// pgSnap is the parsed bounds of a textual pg_snapshot.
type pgSnap struct{ xmin, xmax uint64 }

func parseSnapshot(s string) (pgSnap, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return pgSnap{}, fmt.Errorf("bad snapshot %q", s)
	}
	xmin, err1 := strconv.ParseUint(parts[0], 10, 64)
	xmax, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return pgSnap{}, fmt.Errorf("bad snapshot %q", s)
	}
	return pgSnap{xmin, xmax}, nil
}

// pollSQL is the whole poll in one statement: the function
// sys_reconciler_poll_since (migration 0007) returns NULL when the current
// snapshot is $1 (nothing can have changed: the idle poll of a quiet store
// costs about taking a snapshot), else the entries visible in the current
// snapshot but not in $1 — those whose xid was in progress in $1 or falls
// in [$1.xmax, cur.xmax) — plus everything needed to detect an expired or
// regressed cursor. Its statements read only the (xid) INCLUDE (source,
// key, seq) index, with plans the server keeps per backend (so a pooler
// that cannot keep prepared statements does not make every poll plan them
// again). now() is the store's clock (Cursor.At).
const pollSQL = `SELECT sys_reconciler_poll_since($1), now()`

// Poll implements Store in one round trip.
func (p *Store) Poll(ctx context.Context, cur snapshot.Cursor) ([]snapshot.Address, snapshot.Cursor, error) {
	if cur.IsZero() {
		return nil, cur, fmt.Errorf("poll %s: %w (no cursor yet)", p.url, snapshot.ErrCursorExpired)
	}
	if p.standby != nil {
		return p.pollStandby(ctx, cur)
	}
	prev, err := parseSnapshot(cur.PGSnapshot)
	if err != nil {
		return nil, cur, fmt.Errorf("poll %s: %w: %v", p.url, snapshot.ErrCursorRegressed, err)
	}
	var (
		res []string
		at  time.Time
	)
	polled := time.Now()
	if err := p.pool.QueryRow(ctx, pollSQL, cur.PGSnapshot).Scan(&res, &at); err != nil {
		return nil, cur, p.interpretError("poll", err)
	}
	if res == nil {
		// The same snapshot: nothing became visible and nothing checked
		// below can have changed, if the cursor is this store's (two
		// databases of one cluster share snapshots).
		if err := p.sameStore(ctx, cur); err != nil {
			return nil, cur, err
		}
		next := cur
		next.At = at
		p.stallGate.polled(polled, next, true)
		return nil, next, nil
	}
	if len(res) < 4 || (len(res)-4)%2 != 0 {
		return nil, cur, fmt.Errorf("poll %s: %w: no sys_reconciler_state row", p.url, snapshot.ErrSchema)
	}
	snap, storeID, prunedXid := res[0], res[1], res[2]
	head, err := strconv.ParseInt(res[3], 10, 64)
	if err != nil {
		return nil, cur, fmt.Errorf("poll %s: bad journal head %q", p.url, res[3])
	}
	now, err := parseSnapshot(snap)
	if err != nil {
		return nil, cur, fmt.Errorf("poll %s: %v", p.url, err)
	}
	pruned, _ := strconv.ParseUint(prunedXid, 10, 64)
	switch {
	case storeID != cur.StoreID:
		return nil, cur, fmt.Errorf("poll %s: %w: store id %s, cursor's %s", p.url, snapshot.ErrCursorRegressed, storeID, cur.StoreID)
	case cur.Seq > head:
		return nil, cur, fmt.Errorf("poll %s: %w: journal head %d behind cursor seq %d", p.url, snapshot.ErrCursorRegressed, head, cur.Seq)
	case prev.xmax > now.xmax:
		return nil, cur, fmt.Errorf("poll %s: %w: snapshot xmax %d behind cursor's %d", p.url, snapshot.ErrCursorRegressed, now.xmax, prev.xmax)
	case pruned != 0 && pruned >= prev.xmin:
		return nil, cur, fmt.Errorf("poll %s: %w: pruned up to xid %d, cursor %s", p.url, snapshot.ErrCursorExpired, pruned, cur)
	}
	n := (len(res) - 4) / 2
	sources, keys := res[4:4+n], res[4+n:]
	addrs := make([]snapshot.Address, n)
	for i := range n {
		addrs[i] = snapshot.Address{Table: snapshot.Table(sources[i]), Key: keys[i]}
	}
	next := snapshot.Cursor{StoreID: storeID, Seq: max(head, cur.Seq), PGSnapshot: snap, At: at}
	p.storeID.Store(storeID)
	p.stallGate.polled(polled, next, true)
	return addrs, next, nil
}

// sameStore checks that cur is a cursor of this store: at once when a
// relist or a poll of this store read its id, else (a cursor from another
// process or database; once) with a second statement.
func (p *Store) sameStore(ctx context.Context, cur snapshot.Cursor) error {
	if id, _ := p.storeID.Load().(string); id == cur.StoreID {
		return nil
	}
	var id string
	err := p.pool.QueryRow(ctx, "SELECT store_id FROM sys_reconciler_state WHERE id = 1").Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("poll %s: %w: no sys_reconciler_state row", p.url, snapshot.ErrSchema)
	}
	if err != nil {
		return p.interpretError("poll", err)
	}
	if id != cur.StoreID {
		return fmt.Errorf("poll %s: %w: store id %s, cursor's %s", p.url, snapshot.ErrCursorRegressed, id, cur.StoreID)
	}
	p.storeID.Store(id)
	return nil
}

// The source selects: every column the rows carry, the revision and its
// time from sys_reconciler_revision (a row without one reads revision 0;
// Migrate backfills them).
const (
	// pgMetadataColumns's %[1]s is the body column and %[2]s its withheld
	// length (selectBody).
	pgMetadataColumns = `SELECT m.id, m.type, m.name, m.organization_id, m.package_id, m.state, %[1]s, m.version,
  m.checksum, coalesce(r.revision, 0), coalesce(r.updated_at, m.updated_at), %[2]s`
	pgSelectMetadata = pgMetadataColumns + `
FROM sys_metadata m LEFT JOIN sys_reconciler_revision r ON r.source = 'sys_metadata' AND r.key = m.id`
	// pgRelistMetadata is a relist's select, a merge join of two index
	// scans in id order that streams from its first row. Joined as in
	// pgSelectMetadata, the revisions' source = constant sits below the
	// outer join, so the planner does not see their index as ordered by key
	// and sorts them all first (on disk past work_mem: ~100ms at 100k rows
	// before the first row). The subquery reads them in key order from that
	// index instead; DISTINCT ON (a no-op: the key is unique per source)
	// keeps it a subquery and tells the planner so, which spares the merge
	// join a Materialize. A read by ids keeps pgSelectMetadata, which
	// probes that index per id.
	pgRelistMetadata = pgMetadataColumns + `
FROM sys_metadata m LEFT JOIN (SELECT DISTINCT ON (key) key, revision, updated_at FROM sys_reconciler_revision
  WHERE source = 'sys_metadata' ORDER BY key) r ON r.key = m.id
WHERE m.state = 'active' ORDER BY m.id`
	pgSelectSecret = `SELECT s.id, s.namespace, s.key, s.kms_key_id, s.alg,
  CASE WHEN octet_length(s.ciphertext) > ` + snapshot.MaxCiphertextSQL + ` THEN '!' || octet_length(s.ciphertext) ELSE s.ciphertext END,
  s.organization_id, s.version,
  coalesce(r.revision, 0), coalesce(r.updated_at, s.updated_at)
FROM sys_secret s LEFT JOIN sys_reconciler_revision r ON r.source = 'sys_secret' AND r.key = s.id`
	pgSelectCredential = `SELECT c.ref, c.value, coalesce(r.revision, c.revision), coalesce(r.updated_at, c.updated_at)
FROM sys_connector_credential c LEFT JOIN sys_reconciler_revision r ON r.source = 'sys_connector_credential' AND r.key = c.ref`
)

// Relist implements Store: one REPEATABLE READ, read-only transaction
// reads the active sys_metadata rows, every sys_secret and credential row;
// its own pg_current_snapshot() is the cursor.
func (p *Store) Relist(ctx context.Context) (snapshot.Rows, snapshot.Cursor, error) {
	return p.RelistStream(ctx, nil)
}

// RelistStream implements Streamer: Relist, handing the metadata rows to
// batch (when not nil) every streamBatch rows as they are decoded.
func (p *Store) RelistStream(ctx context.Context, batch func(offset int, rows []snapshot.MetadataRow)) (snapshot.Rows, snapshot.Cursor, error) {
	if p.standby != nil {
		return p.relistStandby(ctx, batch)
	}
	return p.relistIn(ctx, p.pool, p.url, nil, p.interpretError, batch)
}

// streamBatch is how many metadata rows a streaming relist hands over at
// a time: enough to be worth a worker's wake-up, few enough that parsing
// starts at once.
const streamBatch = 1024

// relistIn is a relist on pool (the primary's or the standby's): one
// REPEATABLE READ, read-only transaction reads the active sys_metadata
// rows, every sys_secret and credential row, and its own
// pg_current_snapshot() is the cursor. With seen set it also lists the
// journal xids at or above that snapshot's xmin (the standby's cursor
// needs them). Errors name url and go through interpret; batch, when not
// nil, is handed the metadata rows as they are read (RelistStream).
func (p *Store) relistIn(ctx context.Context, pool *pgxpool.Pool, url string, seen *[]string, interpret func(op string, err error) error,
	batch func(offset int, rows []snapshot.MetadataRow)) (snapshot.Rows, snapshot.Cursor, error) {
	var (
		rows   snapshot.Rows
		c      snapshot.Cursor
		active int
	)
	// The active rows are counted in the transaction's snapshot, so the
	// select's rows fill a slice made at their number.
	q := `SELECT pg_current_snapshot()::text, store_id,
  greatest((SELECT max(seq) FROM sys_reconcile_journal), pruned_seq), now(),
  (SELECT count(*) FROM sys_metadata WHERE state = 'active'),
  (SELECT coalesce(max(revision), 0) FROM sys_reconciler_revision)`
	dest := []any{&c.PGSnapshot, &c.StoreID, &c.Seq, &c.At, &active, &rows.Revision}
	if seen != nil {
		q += `,
  ARRAY(SELECT DISTINCT j.xid::text FROM sys_reconcile_journal j WHERE j.xid >= pg_snapshot_xmin(pg_current_snapshot()))`
		dest = append(dest, seen)
	}
	q += `
FROM sys_reconciler_state WHERE id = 1`
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, q).Scan(dest...); err != nil {
			return err
		}
		b := &pgx.Batch{}
		queueMetadata(b, &rows, active, batch, p.relistMetadata)
		queueSecrets(b, &rows, pgSelectSecret+" ORDER BY s.id")
		queueCredentials(b, &rows, pgSelectCredential+" ORDER BY c.ref")
		return tx.SendBatch(ctx, b).Close()
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return snapshot.Rows{}, snapshot.Cursor{}, fmt.Errorf("relist %s: %w: no sys_reconciler_state row", url, snapshot.ErrSchema)
	}
	if err != nil {
		return snapshot.Rows{}, snapshot.Cursor{}, interpret("relist", err)
	}
	if pool == p.pool {
		p.storeID.Store(c.StoreID)
	}
	return rows, c, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func timeOf(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return *p
}

// real4 widens a PostgreSQL real to the float64 of its shortest decimal
// form, as the platform reads it (2.1, not 2.0999999046325684); NULL is 0.
func real4(p *float32) float64 {
	if p == nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(*p), 'g', -1, 32), 64)
	return f
}

// queueMetadata queues a select of metadata rows (n: how many it returns,
// or at most, when known; it sizes the slice). batch, when not nil, is
// handed the rows every streamBatch rows and at the end.
func queueMetadata(b *pgx.Batch, rows *snapshot.Rows, n int, batch func(offset int, rows []snapshot.MetadataRow), query string, args ...any) {
	b.Queue(query, args...).Query(func(r pgx.Rows) error {
		var (
			d   metadataDecoder
			err error
		)
		rows.Metadata, err = collectRows(r, n, d.decode, streamBatch, batch)
		return err
	})
}

func queueSecrets(b *pgx.Batch, rows *snapshot.Rows, query string, args ...any) {
	b.Queue(query, args...).Query(func(r pgx.Rows) error {
		var err error
		rows.Secrets, err = pgx.CollectRows(r, func(r pgx.CollectableRow) (snapshot.SecretRow, error) {
			var (
				s                                  snapshot.SecretRow
				ns, key, kms, alg, ciphertext, org *string
				version                            *float32
				at                                 *time.Time
			)
			err := r.Scan(&s.ID, &ns, &key, &kms, &alg, &ciphertext, &org, &version, &s.Revision, &at)
			s.Namespace, s.Key, s.KMSKeyID, s.Alg, s.OrganizationID = str(ns), str(key), str(kms), str(alg), str(org)
			s.Ciphertext, s.Withheld = snapshot.CiphertextOf(str(ciphertext))
			s.Version, s.UpdatedAt = real4(version), timeOf(at)
			return s, err
		})
		return err
	})
}

func queueCredentials(b *pgx.Batch, rows *snapshot.Rows, query string, args ...any) {
	b.Queue(query, args...).Query(func(r pgx.Rows) error {
		var err error
		rows.Credentials, err = pgx.CollectRows(r, func(r pgx.CollectableRow) (snapshot.CredentialRow, error) {
			var c snapshot.CredentialRow
			var v *string
			err := r.Scan(&c.Ref, &v, &c.Revision, &c.UpdatedAt)
			if v != nil {
				c.Value = secret.New(*v)
			} else {
				c.Cleared = true
			}
			return c, err
		})
		return err
	})
}

// Read implements Store in one round trip (a batch of up to three
// selects). Rows are returned whatever their state.
func (p *Store) Read(ctx context.Context, addrs []snapshot.Address) (snapshot.Rows, error) {
	meta, secret, cred, err := snapshot.SplitKeys(addrs)
	if err != nil {
		return snapshot.Rows{}, err
	}
	var rows snapshot.Rows
	b := &pgx.Batch{}
	if len(meta) > 0 {
		queueMetadata(b, &rows, len(meta), nil, p.selMetadata+" WHERE m.id = ANY($1) ORDER BY m.id", meta)
	}
	if len(secret) > 0 {
		queueSecrets(b, &rows, pgSelectSecret+" WHERE s.id = ANY($1) ORDER BY s.id", secret)
	}
	if len(cred) > 0 {
		queueCredentials(b, &rows, pgSelectCredential+" WHERE c.ref = ANY($1) ORDER BY c.ref", cred)
	}
	if b.Len() == 0 {
		return rows, nil
	}
	b.Queue(pgReadRevision, meta, secret, cred).QueryRow(func(r pgx.Row) error { return r.Scan(&rows.Revision) })
	if p.standby != nil {
		if err := p.standby.pool.SendBatch(ctx, b).Close(); err != nil {
			return snapshot.Rows{}, p.standbyError("read", err)
		}
		return rows, nil
	}
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return snapshot.Rows{}, p.interpretError("read", err)
	}
	return rows, nil
}

// pgReadRevision is the highest revision of the addresses read, deleted
// rows' tombstones included (primary-key lookups, in Read's round trip).
const pgReadRevision = `SELECT coalesce(max(revision), 0) FROM sys_reconciler_revision
WHERE (source = 'sys_metadata' AND key = ANY($1)) OR (source = 'sys_secret' AND key = ANY($2))
   OR (source = 'sys_connector_credential' AND key = ANY($3))`

// Prune implements Store. Only entries of transactions older than every
// open one (xid below the current xmin) are deleted, so the recorded
// horizon (the highest pruned xid) is exact. It also drops the revisions of
// rows deleted longer ago than retention.
func (p *Store) Prune(ctx context.Context, retention time.Duration) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", lockPrune).Scan(&got); err != nil || !got {
			return err
		}
		if err := tx.QueryRow(ctx, `WITH d AS (
  DELETE FROM sys_reconcile_journal
  WHERE at <= now() - make_interval(secs => $1) AND xid < pg_snapshot_xmin(pg_current_snapshot())
  RETURNING xid, seq
), m AS (SELECT count(*) AS n, max(xid) AS xid, max(seq) AS seq FROM d)
UPDATE sys_reconciler_state st
SET pruned_xid = greatest(st.pruned_xid, m.xid), pruned_seq = greatest(st.pruned_seq, m.seq),
  pruned_at = CASE WHEN m.n > 0 THEN now() ELSE st.pruned_at END
FROM m WHERE st.id = 1
RETURNING m.n`, retention.Seconds()).Scan(&n); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, pgPruneTombstones, retention.Seconds())
		return err
	})
	if err != nil {
		return 0, p.interpretError("prune journal", err)
	}
	return n, nil
}

// pgPruneTombstones deletes the revisions of deleted rows last changed
// before the retention. A concurrent re-insert updates the revision row
// first, so the row is re-checked with a fresh updated_at and kept.
const pgPruneTombstones = `DELETE FROM sys_reconciler_revision r
WHERE r.updated_at <= now() - make_interval(secs => $1)
  AND NOT CASE r.source
    WHEN 'sys_metadata' THEN EXISTS (SELECT 1 FROM sys_metadata m WHERE m.id = r.key)
    WHEN 'sys_secret' THEN EXISTS (SELECT 1 FROM sys_secret s WHERE s.id = r.key)
    WHEN 'sys_connector_credential' THEN EXISTS (SELECT 1 FROM sys_connector_credential c WHERE c.ref = r.key)
    ELSE false END`

// Head implements Store.
func (p *Store) Head(ctx context.Context) (snapshot.Watermark, error) {
	var w snapshot.Watermark
	var revAt *time.Time
	err := p.pool.QueryRow(ctx, `SELECT greatest((SELECT coalesce(max(seq), 0) FROM sys_reconcile_journal), pruned_seq), now(),
  coalesce(r.revision, 0), r.updated_at
FROM sys_reconciler_state LEFT JOIN (SELECT revision, updated_at FROM sys_reconciler_revision ORDER BY revision DESC LIMIT 1) r ON true
WHERE id = 1`).Scan(&w.Seq, &w.At, &w.Revision, &revAt)
	w.RevisionAt = timeOf(revAt)
	if err != nil {
		return snapshot.Watermark{}, p.interpretError("head", err)
	}
	return w, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Heartbeat implements Store.
func (p *Store) Heartbeat(ctx context.Context, r snapshot.Heartbeat) (string, error) {
	var clash string
	var clashNow bool
	err := p.pool.QueryRow(ctx, `INSERT INTO sys_reconciler_replica AS o
  (replica_id, host, pid, version, started_at, heartbeat_at, cursor, cursor_seq, cursor_at, counts, stopped, last_error, node,
   converged_revision, converged_at, head_revision)
VALUES ($1, $2, $3, $4, coalesce($5, now()), coalesce($6, now()), $7, $8, $9, $10::text::jsonb, $11, $12, $13, $14, $15, $16)
ON CONFLICT (replica_id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, version = EXCLUDED.version,
  started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, cursor = EXCLUDED.cursor,
  cursor_seq = EXCLUDED.cursor_seq, cursor_at = EXCLUDED.cursor_at, counts = EXCLUDED.counts,
  stopped = EXCLUDED.stopped, last_error = EXCLUDED.last_error, node = EXCLUDED.node,
  converged_revision = EXCLUDED.converged_revision, converged_at = EXCLUDED.converged_at, head_revision = EXCLUDED.head_revision,
  clash = CASE WHEN `+pgClash+` THEN o.host || ' pid ' || o.pid ELSE o.clash END,
  clash_at = CASE WHEN `+pgClash+` THEN now() ELSE o.clash_at END
RETURNING clash, clash_at IS NOT DISTINCT FROM now()`,
		r.ReplicaID, r.Host, r.PID, r.Version, nullTime(r.StartedAt), nullTime(r.HeartbeatAt), r.Cursor, r.CursorSeq,
		nullTime(r.CursorAt), snapshot.EncodeCounts(r.Counts), r.Stopped, r.LastError, snapshot.NodeJSON(r.Node), r.ConvergedRevision,
		nullTime(r.ConvergedAt), r.HeadRevision).Scan(&clash, &clashNow)
	if err != nil {
		return "", p.interpretError("heartbeat", err)
	}
	if !clashNow {
		clash = ""
	}
	return clash, nil
}

// pgClash: the heartbeat row being replaced is another live process's,
// written since this one started.
const pgClash = `((o.host, o.pid, o.started_at) IS DISTINCT FROM (EXCLUDED.host, EXCLUDED.pid, EXCLUDED.started_at)
  AND NOT o.stopped AND o.heartbeat_at > EXCLUDED.started_at)`

// Heartbeats implements Store.
func (p *Store) Heartbeats(ctx context.Context) ([]snapshot.Heartbeat, error) {
	rows, err := p.pool.Query(ctx, `SELECT replica_id, host, pid, version, started_at, heartbeat_at, cursor, cursor_seq,
  cursor_at, counts::text, stopped, last_error, clash, clash_at, node, converged_revision, converged_at, head_revision,
  (SELECT r.updated_at FROM sys_reconciler_revision r WHERE r.revision > o.converged_revision ORDER BY r.revision LIMIT 1)
FROM sys_reconciler_replica o ORDER BY replica_id`)
	if err != nil {
		return nil, p.interpretError("list replicas", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (snapshot.Heartbeat, error) {
		var rep snapshot.Heartbeat
		var cursorAt, clashAt, convAt, unserved *time.Time
		var counts, node string
		err := r.Scan(&rep.ReplicaID, &rep.Host, &rep.PID, &rep.Version, &rep.StartedAt, &rep.HeartbeatAt, &rep.Cursor,
			&rep.CursorSeq, &cursorAt, &counts, &rep.Stopped, &rep.LastError, &rep.Clash, &clashAt, &node,
			&rep.ConvergedRevision, &convAt, &rep.HeadRevision, &unserved)
		rep.Node = snapshot.ParseNode(node)
		rep.ConvergedAt, rep.UnservedSince = timeOf(convAt), timeOf(unserved)
		if cursorAt != nil {
			rep.CursorAt = *cursorAt
		}
		if clashAt != nil {
			rep.ClashAt = *clashAt
		}
		rep.Counts = snapshot.DecodeCounts(counts)
		return rep, err
	})
	if err != nil {
		return nil, p.interpretError("list replicas", err)
	}
	return out, nil
}

// WriteDrift implements Store.
func (p *Store) WriteDrift(ctx context.Context, replicaID string, at time.Time, report json.RawMessage) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO sys_reconciler_drift (replica_id, at, report) VALUES ($1, $2, $3::text::jsonb)
ON CONFLICT (replica_id) DO UPDATE SET at = EXCLUDED.at, report = EXCLUDED.report`, replicaID, at, string(report))
	return p.interpretError("write drift", err)
}

// Listen implements Hinter: LISTEN on a dedicated connection (not one of the
// pool's), reconnecting with backoff, until ctx ends. It calls wake after
// every (re)connect too, since hints may have been missed meanwhile.
func (p *Store) Listen(ctx context.Context, wake func()) error {
	cfg := p.pool.Config().ConnConfig.Copy()
	retry := backoff.Policy{Base: 100 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.2}
	failures := 0
	for {
		err := p.listenOnce(ctx, cfg, wake, func() { failures = 0 })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures++
		delay := retry.Delay(failures)
		p.log.WarnContext(ctx, "hint listener disconnected", slog.Any("err", p.interpretError("listen", err)), slog.Duration("retry_in", delay))
		if !backoff.Wait(ctx, delay) {
			return ctx.Err()
		}
	}
}

func (p *Store) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, wake, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+hintChannel); err != nil {
		return err
	}
	connected()
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}

// AcquireLease implements Leaser: one upsert, so concurrent callers race
// on the row and exactly one wins.
func (p *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (snapshot.Lease, error) {
	if err := snapshot.CheckLease(name, holder, ttl); err != nil {
		return snapshot.Lease{}, err
	}
	l := snapshot.Lease{Name: name}
	err := p.pool.QueryRow(ctx, `INSERT INTO sys_reconciler_lease AS l (name, holder, token, acquired_at, expires_at)
VALUES ($1, $2, 1, clock_timestamp(), clock_timestamp() + make_interval(secs => $3))
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
  token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.token ELSE l.token + 1 END,
  acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
  expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at <= clock_timestamp()
RETURNING holder, token, acquired_at, expires_at`, name, holder, ttl.Seconds()).Scan(&l.Holder, &l.Token, &l.AcquiredAt, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, _, _, rerr := p.ReadLease(ctx, name)
		if rerr != nil {
			return snapshot.Lease{}, rerr
		}
		return snapshot.Lease{}, &snapshot.LeaseHeldError{Lease: cur}
	}
	if err != nil {
		return snapshot.Lease{}, p.interpretError("acquire lease "+name, err)
	}
	return l, nil
}

// RenewLease implements Leaser.
func (p *Store) RenewLease(ctx context.Context, l snapshot.Lease, ttl time.Duration) (snapshot.Lease, error) {
	if err := snapshot.CheckLease(l.Name, l.Holder, ttl); err != nil {
		return snapshot.Lease{}, err
	}
	err := p.pool.QueryRow(ctx, `UPDATE sys_reconciler_lease SET expires_at = clock_timestamp() + make_interval(secs => $4)
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()
RETURNING expires_at`, l.Name, l.Holder, l.Token, ttl.Seconds()).Scan(&l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return snapshot.Lease{}, fmt.Errorf("renew lease %s of %s: %w", l.Name, l.Holder, snapshot.ErrLeaseLost)
	}
	if err != nil {
		return snapshot.Lease{}, p.interpretError("renew lease "+l.Name, err)
	}
	return l, nil
}

// ReleaseLease implements Leaser.
func (p *Store) ReleaseLease(ctx context.Context, l snapshot.Lease) error {
	_, err := p.pool.Exec(ctx, `UPDATE sys_reconciler_lease SET expires_at = clock_timestamp()
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()`, l.Name, l.Holder, l.Token)
	return p.interpretError("release lease "+l.Name, err)
}

// ReadLease implements Leaser.
func (p *Store) ReadLease(ctx context.Context, name string) (snapshot.Lease, bool, time.Time, error) {
	l := snapshot.Lease{Name: name}
	var now time.Time
	var holder *string
	var token *int64
	var acq, exp *time.Time
	err := p.pool.QueryRow(ctx, `SELECT l.holder, l.token, l.acquired_at, l.expires_at, clock_timestamp()
FROM (SELECT 1) one LEFT JOIN sys_reconciler_lease l ON l.name = $1`, name).Scan(&holder, &token, &acq, &exp, &now)
	if err != nil {
		return snapshot.Lease{}, false, time.Time{}, p.interpretError("read lease "+name, err)
	}
	if holder == nil {
		return snapshot.Lease{}, false, now, nil
	}
	l.Holder, l.Token, l.AcquiredAt, l.ExpiresAt = *holder, *token, *acq, *exp
	return l, true, now, nil
}

// CheckPlatform returns an error wrapping ErrNotPlatform, naming the
// database and some of its tables, when the database holds tables of
// its own but no sys_metadata on the search path: Migrate would create
// the platform's tables in a database no node uses (a wrong store.url)
// and the sidecar would run green doing nothing. An empty database, or
// one with sys_metadata, passes.
func (p *Store) CheckPlatform(ctx context.Context) error {
	var (
		db     string
		has    bool
		others []string
		n      int
	)
	err := p.pool.QueryRow(ctx, `SELECT current_database(), to_regclass('sys_metadata') IS NOT NULL,
  ARRAY(SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
      AND c.relname NOT LIKE 'sys_reconcile%' ORDER BY c.relname LIMIT 5),
  (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
      AND c.relname NOT LIKE 'sys_reconcile%')`).Scan(&db, &has, &others, &n)
	if err != nil {
		return p.interpretError("check database", err)
	}
	if has || n == 0 {
		return nil
	}
	more := ""
	if n > len(others) {
		more = fmt.Sprintf(" and %d more", n-len(others))
	}
	return fmt.Errorf("database %q of %s holds %d tables (%s%s) but no sys_metadata: %w; "+
		"point store.url at the nodes' database (their OS_DATABASE_URL), or run `reconciler migrate --create-platform-tables` to create the platform's tables here",
		db, p.url, n, strings.Join(others, ", "), more, snapshot.ErrNotPlatform)
}

// Columns implements Catalog: the table as the nodes' unqualified name
// finds it (the search path's first schema that has it).
func (p *Store) Columns(ctx context.Context, table string) ([]string, bool, error) {
	var (
		exists bool
		cols   []string
	)
	err := p.pool.QueryRow(ctx, `SELECT c.oid IS NOT NULL, ARRAY(SELECT a.attname::text FROM pg_attribute a
  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum)
FROM (SELECT to_regclass(quote_ident($1)) AS oid) c`, table).Scan(&exists, &cols)
	if err != nil {
		return nil, false, p.interpretError("read the columns of "+table, err)
	}
	return cols, exists, nil
}

// MetadataNamed implements Catalog (on the primary: it checks what a
// write just did).
func (p *Store) MetadataNamed(ctx context.Context, typ, name string) ([]snapshot.MetadataRow, error) {
	var rows snapshot.Rows
	b := &pgx.Batch{}
	queueMetadata(b, &rows, 1, nil, p.selMetadata+" WHERE m.type = $1 AND m.name = $2 ORDER BY m.id", typ, name)
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, p.interpretError("read "+typ+"/"+name, err)
	}
	return rows.Metadata, nil
}
