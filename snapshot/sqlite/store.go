package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/objectstack-fleet/reconciler/secret"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Store is the embedded SQLite store (pure Go, no cgo). One writer at a time
// makes journal seq order commit order, so its cursor is the seq.
type Store struct {
	db   *sql.DB
	path string
	url  string
	log  *slog.Logger
	// selMetadata selects metadata rows, bodies above the cap withheld.
	selMetadata string
}

var (
	_ snapshot.Store            = (*Store)(nil)
	_ snapshot.Catalog          = (*Store)(nil)
	_ snapshot.CredentialOwners = (*Store)(nil)
)

//go:embed migrations
var sqliteMigrations embed.FS

// sqliteSchema is the SQLite store's migrations.
var sqliteSchema = snapshot.NewSchema("sqlite", sqliteMigrations, "migrations")

func init() {
	snapshot.Register(snapshot.Backend{
		Kind:     "sqlite",
		Schemes:  []string{"sqlite"},
		Form:     "sqlite://PATH",
		CheckURL: checkSQLiteURL,
		Schema:   sqliteSchema,
		Open: func(rawURL string, opts snapshot.OpenOptions) (snapshot.Store, error) {
			s, err := newSQLite(rawURL, opts)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
	})
}

// checkSQLiteURL is store.url's check of a SQLite URL: a file path, no
// query.
func checkSQLiteURL(s string) error {
	if _, err := Path(s); err != nil {
		return errors.New("want sqlite://rel/path.db or sqlite:///abs/path.db (no query)")
	}
	return nil
}

// sqliteTime is how timestamps are stored: RFC 3339 in UTC with
// milliseconds, the same text strftime('%Y-%m-%dT%H:%M:%fZ') writes, so
// they compare as strings.
const sqliteTime = "2006-01-02T15:04:05.000Z"

// Path returns the file path of a sqlite:// URL: sqlite://rel/path.db
// is relative to the working directory, sqlite:///abs/path.db absolute.
func Path(rawURL string) (string, error) {
	rest, ok := strings.CutPrefix(rawURL, "sqlite://")
	if !ok {
		return "", snapshot.BadURL(rawURL, "not a sqlite:// url")
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		return "", snapshot.BadURL(rawURL, "sqlite urls take no query or fragment")
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		return "", snapshot.BadURL(rawURL, err.Error())
	}
	if p == "" || p == "/" {
		return "", snapshot.BadURL(rawURL, "missing database file path (want sqlite://rel/path.db or sqlite:///abs/path.db)")
	}
	return p, nil
}

func newSQLite(rawURL string, opts snapshot.OpenOptions) (*Store, error) {
	p, err := Path(rawURL)
	if err != nil {
		return nil, err
	}
	dsn := "file:" + (&url.URL{Path: p}).EscapedPath() +
		"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn) // no I/O until first use
	if err != nil {
		return nil, snapshot.BadURL(rawURL, err.Error())
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	return &Store{db: db, path: p, url: rawURL, log: opts.Log(),
		selMetadata: snapshot.SelectBody(sqSelectMetadata, "length(CAST(m.metadata AS BLOB))", opts.MaxBodyBytes, opts.MaxTotalBytes)}, nil
}

// Kind implements Store.
func (s *Store) Kind() string { return "sqlite" }

// Close implements Store.
func (s *Store) Close() { _ = s.db.Close() }

// interpretError maps a sqlite error to the package's sentinels; it is the
// only place that looks at sqlite error types.
func (s *Store) interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &snapshot.StoreError{Op: op, URL: s.url, Msg: err.Error()}
	var se *sqlitedrv.Error
	switch {
	case errors.Is(err, context.Canceled):
		e.Cause = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		e.Sentinel, e.Cause = snapshot.ErrUnavailable, context.DeadlineExceeded
	case errors.As(err, &se):
		msg := se.Error()
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT,
			sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			e.Sentinel = snapshot.ErrUnavailable
		default:
			if strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") {
				e.Sentinel = snapshot.ErrSchema
				e.Msg += ": run `reconciler migrate`"
			}
		}
	case errors.Is(err, sql.ErrConnDone), strings.Contains(err.Error(), "database is closed"):
		e.Sentinel = snapshot.ErrUnavailable
	}
	return e
}

// Ping implements Store.
func (s *Store) Ping(ctx context.Context) error {
	return s.interpretError("ping", s.db.PingContext(ctx))
}

// writeTx runs f in a BEGIN IMMEDIATE transaction (the write lock up front,
// so no upgrade deadlock).
func (s *Store) writeTx(ctx context.Context, f func(c *sql.Conn) error) (err error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if err := f(c); err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, "COMMIT")
	return err
}

// Migrate implements Store: Schema.Migrate in one write transaction.
func (s *Store) Migrate(ctx context.Context) error {
	err := s.writeTx(ctx, func(c *sql.Conn) error {
		return sqliteSchema.Migrate(ctx, sqliteMigrateTx{c}, s.log)
	})
	return s.interpretError("migrate", err)
}

// AutoMigrates implements Store: a SQLite store is a local file of this
// process's, migrated at every start.
func (s *Store) AutoMigrates() bool { return true }

// sqliteMigrateTx is Migrate's transaction as Schema.Migrate uses it.
type sqliteMigrateTx struct{ c *sql.Conn }

func (m sqliteMigrateTx) Applied(ctx context.Context) ([]int, error) {
	if _, err := m.c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sys_reconciler_schema (
  version INTEGER PRIMARY KEY, name TEXT NOT NULL,
  applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))`); err != nil {
		return nil, err
	}
	return sqliteSelect(ctx, m.c, "SELECT version FROM sys_reconciler_schema", nil,
		func(r *sql.Rows) (v int, err error) { return v, r.Scan(&v) })
}

func (m sqliteMigrateTx) TableExists(ctx context.Context, t snapshot.Table) (bool, error) {
	var n int
	err := m.c.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", string(t)).Scan(&n)
	return n > 0, err
}

func (m sqliteMigrateTx) Exec(ctx context.Context, script string) error {
	_, err := m.c.ExecContext(ctx, script)
	return err
}

func (m sqliteMigrateTx) Record(ctx context.Context, version int, name string) error {
	_, err := m.c.ExecContext(ctx, "INSERT INTO sys_reconciler_schema (version, name) VALUES (?, ?)", version, name)
	return err
}

func (m sqliteMigrateTx) Backfill(ctx context.Context) (int64, error) {
	res, err := m.c.ExecContext(ctx, sqliteBackfill)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// sqliteBackfill gives a revision (and a journal entry) to every source row
// that has none: rows written before the triggers existed.
const sqliteBackfill = `INSERT INTO sys_reconcile_change (source, key, op)
SELECT t.source, t.key, 'update' FROM (
  SELECT 'sys_metadata' AS source, id AS key FROM sys_metadata
  UNION ALL SELECT 'sys_secret', id FROM sys_secret
  UNION ALL SELECT 'sys_connector_credential', ref FROM sys_connector_credential
) t
WHERE NOT EXISTS (SELECT 1 FROM sys_reconciler_revision r WHERE r.source = t.source AND r.key = t.key)`

// CheckSchema implements Store: the schema version and the row triggers
// on the source tables.
func (s *Store) CheckSchema(ctx context.Context) error {
	want, err := sqliteSchema.Triggers()
	if err != nil {
		return err
	}
	v, err := sqliteSelect(ctx, s.db, "SELECT version FROM sys_reconciler_schema", nil,
		func(r *sql.Rows) (int, error) {
			var v int
			return v, r.Scan(&v)
		})
	if err != nil {
		return s.interpretError("check schema", err)
	}
	if err := sqliteSchema.CheckVersions(s.url, v); err != nil {
		return err
	}
	have, err := sqliteSelect(ctx, s.db, "SELECT name || ' on ' || tbl_name FROM sqlite_master WHERE type = 'trigger'", nil,
		func(r *sql.Rows) (string, error) {
			var n string
			return n, r.Scan(&n)
		})
	if err != nil {
		return s.interpretError("check schema", err)
	}
	var missing []string
	for _, tg := range want {
		if n := tg.Name + " on " + tg.Table; !slices.Contains(have, n) {
			missing = append(missing, n)
		}
	}
	return snapshot.CheckTriggers(s.url, missing)
}

const sqliteHead = `max(coalesce((SELECT max(seq) FROM sys_reconcile_journal), 0), st.pruned_seq)`

// Poll implements Store with one statement (one consistent read).
func (s *Store) Poll(ctx context.Context, cur snapshot.Cursor) ([]snapshot.Address, snapshot.Cursor, error) {
	if cur.IsZero() {
		return nil, cur, fmt.Errorf("poll %s: %w (no cursor yet)", s.url, snapshot.ErrCursorExpired)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT st.store_id, st.pruned_seq, `+sqliteHead+`,
  strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), j.source, j.key
FROM sys_reconciler_state st LEFT JOIN sys_reconcile_journal j ON j.seq > ?
WHERE st.id = 1 ORDER BY j.seq`, cur.Seq)
	if err != nil {
		return nil, cur, s.interpretError("poll", err)
	}
	defer rows.Close()
	var (
		addrs        []snapshot.Address
		storeID, at  string
		pruned, head int64
		source, key  sql.NullString
		n            int
	)
	for rows.Next() {
		if err := rows.Scan(&storeID, &pruned, &head, &at, &source, &key); err != nil {
			return nil, cur, s.interpretError("poll", err)
		}
		n++
		if source.Valid {
			addrs = append(addrs, snapshot.Address{Table: snapshot.Table(source.String), Key: key.String})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, cur, s.interpretError("poll", err)
	}
	switch {
	case n == 0:
		return nil, cur, fmt.Errorf("poll %s: %w: no sys_reconciler_state row", s.url, snapshot.ErrSchema)
	case storeID != cur.StoreID:
		return nil, cur, fmt.Errorf("poll %s: %w: store id %s, cursor's %s", s.url, snapshot.ErrCursorRegressed, storeID, cur.StoreID)
	case cur.Seq > head:
		return nil, cur, fmt.Errorf("poll %s: %w: journal head %d behind cursor seq %d", s.url, snapshot.ErrCursorRegressed, head, cur.Seq)
	case pruned > cur.Seq:
		return nil, cur, fmt.Errorf("poll %s: %w: pruned up to seq %d, cursor %s", s.url, snapshot.ErrCursorExpired, pruned, cur)
	}
	return addrs, snapshot.Cursor{StoreID: storeID, Seq: head, At: parseSQLiteTime(at)}, nil
}

func parseSQLiteTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t, _ = time.Parse("2006-01-02 15:04:05", s) // CURRENT_TIMESTAMP written by hand
	}
	return t.UTC()
}

// The source selects, as on PostgreSQL.
const (
	sqSelectMetadata = `SELECT m.id, m.type, m.name, m.organization_id, m.package_id, m.state, %[1]s, m.version,
  m.checksum, coalesce(r.revision, 0), coalesce(r.updated_at, m.updated_at), %[2]s
FROM sys_metadata m LEFT JOIN sys_reconciler_revision r ON r.source = 'sys_metadata' AND r.key = m.id`
	sqSelectSecret = `SELECT s.id, s.namespace, s.key, s.kms_key_id, s.alg,
  CASE WHEN length(CAST(s.ciphertext AS BLOB)) > ` + snapshot.MaxCiphertextSQL + ` THEN '!' || length(CAST(s.ciphertext AS BLOB)) ELSE s.ciphertext END,
  s.organization_id, s.version,
  coalesce(r.revision, 0), coalesce(r.updated_at, s.updated_at)
FROM sys_secret s LEFT JOIN sys_reconciler_revision r ON r.source = 'sys_secret' AND r.key = s.id`
	sqSelectCredential = `SELECT c.ref, c.value, coalesce(r.revision, c.revision), coalesce(r.updated_at, c.updated_at)
FROM sys_connector_credential c LEFT JOIN sys_reconciler_revision r ON r.source = 'sys_connector_credential' AND r.key = c.ref`
)

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func sqliteSelect[T any](ctx context.Context, q querier, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// SQLite stores any value in any column, so the scans take what a writer
// put there without failing the read: text of any kind as its bytes, a
// number where text is expected as its text, text where a number is
// expected as 0 unless it parses.

// sqliteFloat reads a REAL column whatever is stored in it.
func sqliteFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case string:
		f, _ := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f
	case []byte:
		f, _ := strconv.ParseFloat(strings.TrimSpace(string(x)), 64)
		return f
	}
	return 0
}

func scanSQLiteMetadata(r *sql.Rows) (snapshot.MetadataRow, error) {
	var (
		m                                              snapshot.MetadataRow
		id, typ, name, org, pkg, state, body, csum, at sql.NullString
		version                                        any
	)
	err := r.Scan(&id, &typ, &name, &org, &pkg, &state, &body, &version, &csum, &m.Revision, &at, &m.Withheld)
	m.ID, m.Type, m.Name, m.OrganizationID, m.PackageID = id.String, typ.String, name.String, org.String, pkg.String
	m.State, m.Version, m.Checksum, m.UpdatedAt = state.String, sqliteFloat(version), csum.String, parseSQLiteTime(at.String)
	if body.Valid {
		m.Metadata = json.RawMessage(body.String)
	}
	return m, err
}

func scanSQLiteSecret(r *sql.Rows) (snapshot.SecretRow, error) {
	var (
		s                                          snapshot.SecretRow
		id, ns, key, kms, alg, ciphertext, org, at sql.NullString
		version                                    any
	)
	err := r.Scan(&id, &ns, &key, &kms, &alg, &ciphertext, &org, &version, &s.Revision, &at)
	s.ID, s.Namespace, s.Key, s.KMSKeyID, s.Alg = id.String, ns.String, key.String, kms.String, alg.String
	s.Ciphertext, s.Withheld = snapshot.CiphertextOf(ciphertext.String)
	s.OrganizationID = org.String
	s.Version, s.UpdatedAt = sqliteFloat(version), parseSQLiteTime(at.String)
	return s, err
}

func scanSQLiteCredential(r *sql.Rows) (snapshot.CredentialRow, error) {
	var c snapshot.CredentialRow
	var ref, v, at sql.NullString
	err := r.Scan(&ref, &v, &c.Revision, &at)
	c.Ref, c.Value, c.Cleared, c.UpdatedAt = ref.String, secret.New(v.String), !v.Valid, parseSQLiteTime(at.String)
	return c, err
}

// Relist implements Store in one read transaction: the active
// sys_metadata rows, every sys_secret and credential row.
func (s *Store) Relist(ctx context.Context) (snapshot.Rows, snapshot.Cursor, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return snapshot.Rows{}, snapshot.Cursor{}, s.interpretError("relist", err)
	}
	defer func() { _ = tx.Rollback() }()
	var (
		rows snapshot.Rows
		c    snapshot.Cursor
		at   string
	)
	err = tx.QueryRowContext(ctx, `SELECT store_id, `+sqliteHead+`, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
  (SELECT coalesce(max(revision), 0) FROM sys_reconciler_revision)
FROM sys_reconciler_state st WHERE id = 1`).Scan(&c.StoreID, &c.Seq, &at, &rows.Revision)
	if errors.Is(err, sql.ErrNoRows) {
		return snapshot.Rows{}, snapshot.Cursor{}, fmt.Errorf("relist %s: %w: no sys_reconciler_state row", s.url, snapshot.ErrSchema)
	}
	if err == nil {
		c.At = parseSQLiteTime(at)
		rows.Metadata, err = sqliteSelect(ctx, tx, s.selMetadata+" WHERE m.state = 'active' ORDER BY m.id", nil, scanSQLiteMetadata)
	}
	if err == nil {
		rows.Secrets, err = sqliteSelect(ctx, tx, sqSelectSecret+" ORDER BY s.id", nil, scanSQLiteSecret)
	}
	if err == nil {
		rows.Credentials, err = sqliteSelect(ctx, tx, sqSelectCredential+" ORDER BY c.ref", nil, scanSQLiteCredential)
	}
	if err != nil {
		return snapshot.Rows{}, snapshot.Cursor{}, s.interpretError("relist", err)
	}
	return rows, c, nil
}

// jsonKeys passes a key set as one parameter, read back with json_each: the
// SQLite counterpart of = ANY($1).
func jsonKeys(keys []string) string {
	b, _ := json.Marshal(keys)
	return string(b)
}

// Read implements Store in one read transaction, whatever the rows' state.
func (s *Store) Read(ctx context.Context, addrs []snapshot.Address) (snapshot.Rows, error) {
	meta, secret, cred, err := snapshot.SplitKeys(addrs)
	if err != nil {
		return snapshot.Rows{}, err
	}
	var rows snapshot.Rows
	if len(meta)+len(secret)+len(cred) == 0 {
		return rows, nil
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return snapshot.Rows{}, s.interpretError("read", err)
	}
	defer func() { _ = tx.Rollback() }()
	const in = " IN (SELECT value FROM json_each(?))"
	if len(meta) > 0 {
		rows.Metadata, err = sqliteSelect(ctx, tx, s.selMetadata+" WHERE m.id"+in+" ORDER BY m.id", []any{jsonKeys(meta)}, scanSQLiteMetadata)
	}
	if err == nil && len(secret) > 0 {
		rows.Secrets, err = sqliteSelect(ctx, tx, sqSelectSecret+" WHERE s.id"+in+" ORDER BY s.id", []any{jsonKeys(secret)}, scanSQLiteSecret)
	}
	if err == nil && len(cred) > 0 {
		rows.Credentials, err = sqliteSelect(ctx, tx, sqSelectCredential+" WHERE c.ref"+in+" ORDER BY c.ref", []any{jsonKeys(cred)}, scanSQLiteCredential)
	}
	if err == nil {
		err = tx.QueryRowContext(ctx, sqliteReadRevision, jsonKeys(meta), jsonKeys(secret), jsonKeys(cred)).Scan(&rows.Revision)
	}
	if err != nil {
		return snapshot.Rows{}, s.interpretError("read", err)
	}
	return rows, nil
}

// sqliteReadRevision is the highest revision of the addresses read,
// deleted rows' tombstones included (primary-key lookups).
const sqliteReadRevision = `SELECT coalesce(max(revision), 0) FROM sys_reconciler_revision
WHERE (source = 'sys_metadata' AND key IN (SELECT value FROM json_each(?1)))
   OR (source = 'sys_secret' AND key IN (SELECT value FROM json_each(?2)))
   OR (source = 'sys_connector_credential' AND key IN (SELECT value FROM json_each(?3)))`

// Prune implements Store: it deletes up to the newest entry older than
// retention and records that seq as the horizon, and drops the revisions
// of rows deleted longer ago than retention. The write lock makes it one
// replica at a time.
func (s *Store) Prune(ctx context.Context, retention time.Duration) (int64, error) {
	var n int64
	cutoff := time.Now().UTC().Add(-retention).Format(sqliteTime)
	err := s.writeTx(ctx, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, sqlitePruneTombstones, cutoff); err != nil {
			return err
		}
		var upTo int64
		if err := c.QueryRowContext(ctx, "SELECT coalesce(max(seq), 0) FROM sys_reconcile_journal WHERE at <= ?", cutoff).Scan(&upTo); err != nil {
			return err
		}
		if upTo == 0 {
			return nil
		}
		res, err := c.ExecContext(ctx, "DELETE FROM sys_reconcile_journal WHERE seq <= ?", upTo)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		_, err = c.ExecContext(ctx, `UPDATE sys_reconciler_state SET pruned_seq = max(pruned_seq, ?),
  pruned_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = 1`, upTo)
		return err
	})
	if err != nil {
		return 0, s.interpretError("prune journal", err)
	}
	return n, nil
}

// sqlitePruneTombstones deletes the revisions of deleted rows last changed
// before the cutoff.
const sqlitePruneTombstones = `DELETE FROM sys_reconciler_revision
WHERE updated_at <= ?
  AND NOT CASE source
    WHEN 'sys_metadata' THEN EXISTS (SELECT 1 FROM sys_metadata m WHERE m.id = sys_reconciler_revision.key)
    WHEN 'sys_secret' THEN EXISTS (SELECT 1 FROM sys_secret s WHERE s.id = sys_reconciler_revision.key)
    WHEN 'sys_connector_credential' THEN EXISTS (SELECT 1 FROM sys_connector_credential c WHERE c.ref = sys_reconciler_revision.key)
    ELSE 0 END`

// Stall implements Store. SQLite has no concurrent writers to name.
func (s *Store) Stall(ctx context.Context, cur snapshot.Cursor, _ time.Duration) (snapshot.Stall, error) {
	var st snapshot.Stall
	err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sys_reconcile_journal WHERE seq > ?", cur.Seq).Scan(&st.Pending)
	if err != nil {
		return snapshot.Stall{}, s.interpretError("stall", err)
	}
	return st, nil
}

// Head implements Store.
func (s *Store) Head(ctx context.Context) (snapshot.Watermark, error) {
	var w snapshot.Watermark
	var at string
	var revAt sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT `+sqliteHead+`, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
  coalesce((SELECT max(revision) FROM sys_reconciler_revision), 0),
  (SELECT updated_at FROM sys_reconciler_revision ORDER BY revision DESC LIMIT 1)
FROM sys_reconciler_state st WHERE id = 1`).Scan(&w.Seq, &at, &w.Revision, &revAt)
	if err != nil {
		return snapshot.Watermark{}, s.interpretError("head", err)
	}
	w.At = parseSQLiteTime(at)
	if revAt.Valid {
		w.RevisionAt = parseSQLiteTime(revAt.String)
	}
	return w, nil
}

func sqliteTimeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(sqliteTime)
}

// Heartbeat implements Store.
func (s *Store) Heartbeat(ctx context.Context, r snapshot.Heartbeat) (string, error) {
	var clash string
	var clashNow bool
	err := s.db.QueryRowContext(ctx, `INSERT INTO sys_reconciler_replica AS o
  (replica_id, host, pid, version, started_at, heartbeat_at, cursor, cursor_seq, cursor_at, counts, stopped, last_error, node,
   converged_revision, converged_at, head_revision)
VALUES (?1, ?2, ?3, ?4, coalesce(?5, `+sqliteNow+`), coalesce(?6, `+sqliteNow+`), ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
ON CONFLICT (replica_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version,
  started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, cursor = excluded.cursor,
  cursor_seq = excluded.cursor_seq, cursor_at = excluded.cursor_at, counts = excluded.counts,
  stopped = excluded.stopped, last_error = excluded.last_error, node = excluded.node,
  converged_revision = excluded.converged_revision, converged_at = excluded.converged_at, head_revision = excluded.head_revision,
  clash = CASE WHEN `+sqliteClash+` THEN o.host || ' pid ' || o.pid ELSE o.clash END,
  clash_at = CASE WHEN `+sqliteClash+` THEN `+sqliteNow+` ELSE o.clash_at END
RETURNING clash, coalesce(clash_at = `+sqliteNow+`, 0)`,
		r.ReplicaID, r.Host, r.PID, r.Version, sqliteTimeArg(r.StartedAt), sqliteTimeArg(r.HeartbeatAt), r.Cursor, r.CursorSeq,
		sqliteTimeArg(r.CursorAt), snapshot.EncodeCounts(r.Counts), r.Stopped, r.LastError, snapshot.NodeJSON(r.Node), r.ConvergedRevision,
		sqliteTimeArg(r.ConvergedAt), r.HeadRevision).Scan(&clash, &clashNow)
	if err != nil {
		return "", s.interpretError("heartbeat", err)
	}
	if !clashNow {
		clash = ""
	}
	return clash, nil
}

// sqliteClash: the heartbeat row being replaced is another live
// process's, written since this one started.
const sqliteClash = `((o.host <> excluded.host OR o.pid <> excluded.pid OR o.started_at <> excluded.started_at)
  AND NOT o.stopped AND o.heartbeat_at > excluded.started_at)`

// Heartbeats implements Store.
func (s *Store) Heartbeats(ctx context.Context) ([]snapshot.Heartbeat, error) {
	out, err := sqliteSelect(ctx, s.db, `SELECT replica_id, host, pid, version, started_at, heartbeat_at, cursor, cursor_seq,
  cursor_at, counts, stopped, last_error, clash, clash_at, node, converged_revision, converged_at, head_revision,
  (SELECT r.updated_at FROM sys_reconciler_revision r WHERE r.revision > o.converged_revision ORDER BY r.revision LIMIT 1)
FROM sys_reconciler_replica o ORDER BY replica_id`, nil, func(r *sql.Rows) (snapshot.Heartbeat, error) {
		var rep snapshot.Heartbeat
		var started, hb, counts, node string
		var cursorAt, clashAt, convAt, unserved sql.NullString
		err := r.Scan(&rep.ReplicaID, &rep.Host, &rep.PID, &rep.Version, &started, &hb, &rep.Cursor, &rep.CursorSeq,
			&cursorAt, &counts, &rep.Stopped, &rep.LastError, &rep.Clash, &clashAt, &node, &rep.ConvergedRevision, &convAt,
			&rep.HeadRevision, &unserved)
		if err != nil {
			return rep, err
		}
		rep.Node = snapshot.ParseNode(node)
		rep.StartedAt, rep.HeartbeatAt = parseSQLiteTime(started), parseSQLiteTime(hb)
		if cursorAt.Valid {
			rep.CursorAt = parseSQLiteTime(cursorAt.String)
		}
		if clashAt.Valid {
			rep.ClashAt = parseSQLiteTime(clashAt.String)
		}
		if convAt.Valid {
			rep.ConvergedAt = parseSQLiteTime(convAt.String)
		}
		if unserved.Valid {
			rep.UnservedSince = parseSQLiteTime(unserved.String)
		}
		rep.Counts = snapshot.DecodeCounts(counts)
		return rep, nil
	})
	if err != nil {
		return nil, s.interpretError("list replicas", err)
	}
	return out, nil
}

// WriteDrift implements Store.
func (s *Store) WriteDrift(ctx context.Context, replicaID string, at time.Time, report json.RawMessage) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO sys_reconciler_drift (replica_id, at, report) VALUES (?, ?, ?)
ON CONFLICT (replica_id) DO UPDATE SET at = excluded.at, report = excluded.report`,
		replicaID, at.UTC().Format(sqliteTime), string(report))
	return s.interpretError("write drift", err)
}

// sqliteNow is the store's clock in its time format; 'now' is one value
// within a statement.
const sqliteNow = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// sqliteLater is sqliteNow plus the seconds in parameter n.
func sqliteLater(n int) string {
	return fmt.Sprintf(`strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now', '+' || ?%d || ' seconds')`, n)
}

// AcquireLease implements Leaser: one upsert in a write transaction.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (snapshot.Lease, error) {
	if err := snapshot.CheckLease(name, holder, ttl); err != nil {
		return snapshot.Lease{}, err
	}
	l := snapshot.Lease{Name: name}
	var acq, exp string
	err := s.db.QueryRowContext(ctx, `INSERT INTO sys_reconciler_lease AS l (name, holder, token, acquired_at, expires_at)
VALUES (?1, ?2, 1, `+sqliteNow+`, `+sqliteLater(3)+`)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,
  token = CASE WHEN l.holder = excluded.holder AND l.expires_at > `+sqliteNow+` THEN l.token ELSE l.token + 1 END,
  acquired_at = CASE WHEN l.holder = excluded.holder AND l.expires_at > `+sqliteNow+` THEN l.acquired_at ELSE excluded.acquired_at END,
  expires_at = excluded.expires_at
WHERE l.holder = excluded.holder OR l.expires_at <= `+sqliteNow+`
RETURNING holder, token, acquired_at, expires_at`, name, holder, ttl.Seconds()).Scan(&l.Holder, &l.Token, &acq, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		cur, _, _, rerr := s.ReadLease(ctx, name)
		if rerr != nil {
			return snapshot.Lease{}, rerr
		}
		return snapshot.Lease{}, &snapshot.LeaseHeldError{Lease: cur}
	}
	if err != nil {
		return snapshot.Lease{}, s.interpretError("acquire lease "+name, err)
	}
	l.AcquiredAt, l.ExpiresAt = parseSQLiteTime(acq), parseSQLiteTime(exp)
	return l, nil
}

// RenewLease implements Leaser.
func (s *Store) RenewLease(ctx context.Context, l snapshot.Lease, ttl time.Duration) (snapshot.Lease, error) {
	if err := snapshot.CheckLease(l.Name, l.Holder, ttl); err != nil {
		return snapshot.Lease{}, err
	}
	var exp string
	err := s.db.QueryRowContext(ctx, `UPDATE sys_reconciler_lease SET expires_at = `+sqliteLater(4)+`
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > `+sqliteNow+`
RETURNING expires_at`, l.Name, l.Holder, l.Token, ttl.Seconds()).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return snapshot.Lease{}, fmt.Errorf("renew lease %s of %s: %w", l.Name, l.Holder, snapshot.ErrLeaseLost)
	}
	if err != nil {
		return snapshot.Lease{}, s.interpretError("renew lease "+l.Name, err)
	}
	l.ExpiresAt = parseSQLiteTime(exp)
	return l, nil
}

// ReleaseLease implements Leaser.
func (s *Store) ReleaseLease(ctx context.Context, l snapshot.Lease) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sys_reconciler_lease SET expires_at = `+sqliteNow+`
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > `+sqliteNow, l.Name, l.Holder, l.Token)
	return s.interpretError("release lease "+l.Name, err)
}

// ReadLease implements Leaser.
func (s *Store) ReadLease(ctx context.Context, name string) (snapshot.Lease, bool, time.Time, error) {
	var holder, acq, exp sql.NullString
	var token sql.NullInt64
	var now string
	err := s.db.QueryRowContext(ctx, `SELECT l.holder, l.token, l.acquired_at, l.expires_at, `+sqliteNow+`
FROM (SELECT 1) one LEFT JOIN sys_reconciler_lease l ON l.name = ?1`, name).Scan(&holder, &token, &acq, &exp, &now)
	if err != nil {
		return snapshot.Lease{}, false, time.Time{}, s.interpretError("read lease "+name, err)
	}
	if !holder.Valid {
		return snapshot.Lease{}, false, parseSQLiteTime(now), nil
	}
	return snapshot.Lease{Name: name, Holder: holder.String, Token: token.Int64, AcquiredAt: parseSQLiteTime(acq.String),
		ExpiresAt: parseSQLiteTime(exp.String)}, true, parseSQLiteTime(now), nil
}

// Columns implements Catalog.
func (s *Store) Columns(ctx context.Context, table string) ([]string, bool, error) {
	cols, err := sqliteSelect(ctx, s.db, `SELECT name FROM pragma_table_info(?1) ORDER BY cid`, []any{table},
		func(r *sql.Rows) (string, error) {
			var c string
			return c, r.Scan(&c)
		})
	if err != nil {
		return nil, false, s.interpretError("read the columns of "+table, err)
	}
	return cols, len(cols) > 0, nil
}

// MetadataNamed implements Catalog.
func (s *Store) MetadataNamed(ctx context.Context, typ, name string) ([]snapshot.MetadataRow, error) {
	rows, err := sqliteSelect(ctx, s.db, s.selMetadata+" WHERE m.type = ?1 AND m.name = ?2 ORDER BY m.id", []any{typ, name}, scanSQLiteMetadata)
	if err != nil {
		return nil, s.interpretError("read "+typ+"/"+name, err)
	}
	return rows, nil
}
