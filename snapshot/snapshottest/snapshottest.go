package snapshottest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the SQLite driver for plain-SQL writers

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot"
	_ "github.com/objectstack-fleet/reconciler/snapshot/backends" // the stores its helpers open
	"github.com/objectstack-fleet/reconciler/snapshot/sqlite"
)

// TemplateName is the PostgreSQL template database holding this binary's
// migrated schema: named after the schema version and the migrations'
// fingerprint.
func TemplateName() string {
	return fmt.Sprintf("reconciler_tpl_v%d_%s", snapshot.SchemaVersion, snapshot.SchemaFingerprint())
}

// NewPostgresURL returns the URL of a fresh, migrated PostgreSQL database
// with its own store id, dropped when the test ends.
func NewPostgresURL(t testing.TB) string {
	t.Helper()
	tpl := testdb.Template(t, TemplateName(), func(ctx context.Context, url string) error {
		s, err := snapshot.Open(url, snapshot.OpenOptions{})
		if err != nil {
			return err
		}
		defer s.Close()
		return s.Migrate(ctx)
	})
	url := testdb.NewFromTemplate(t, tpl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Copies of one template would share a store id; a new database is a
	// new store.
	if err := testdb.Exec(ctx, url, "UPDATE sys_reconciler_state SET store_id = gen_random_uuid()::text"); err != nil {
		t.Fatalf("snapshottest: set store id: %v", err)
	}
	return url
}

// NewPostgres returns an open store on a fresh, migrated PostgreSQL
// database and its URL. The store is closed and the database dropped when
// the test ends.
func NewPostgres(t testing.TB) (snapshot.Store, string) {
	t.Helper()
	url := NewPostgresURL(t)
	return open(t, url), url
}

// NewSQLiteURL returns the URL of a migrated SQLite file in t.TempDir().
func NewSQLiteURL(t testing.TB) string {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "store.db")
	s := open(t, url)
	s.Close()
	return url
}

// NewSQLite returns an open store on a migrated SQLite file in t.TempDir()
// and its URL; the store is closed when the test ends.
func NewSQLite(t testing.TB) (snapshot.Store, string) {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "store.db")
	return open(t, url), url
}

func open(t testing.TB, url string) snapshot.Store {
	t.Helper()
	s, err := snapshot.Open(url, snapshot.OpenOptions{})
	if err != nil {
		t.Fatalf("snapshottest: open: %v", err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("snapshottest: migrate: %v", err)
	}
	return s
}

// Backend is a store backend as the tests get stores of it: the fixture
// that Each and the conformance suite (Run) use.
type Backend struct {
	// Kind is the backend's Store.Kind.
	Kind string
	// New returns an open store on a fresh, migrated database and its URL;
	// the store is closed and the database dropped when the test ends.
	New func(t testing.TB) (snapshot.Store, string)
	// NewURL returns the URL of a fresh, migrated database.
	NewURL func(t testing.TB) string
	// EmptyURL returns the URL of a fresh database without the schema.
	EmptyURL func(t testing.TB) string
}

// The backends' fixtures.
var (
	Postgres = Backend{Kind: "postgres", New: NewPostgres, NewURL: NewPostgresURL, EmptyURL: testdb.New}
	SQLite   = Backend{Kind: "sqlite", New: NewSQLite, NewURL: NewSQLiteURL,
		EmptyURL: func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "empty.db") }}
)

// Backends are the backends Each runs f on: every backend snapshot/backends
// links in.
var Backends = []Backend{Postgres, SQLite}

// Each runs f as a parallel subtest per backend (named by its kind), each
// with its own fresh, migrated store.
func Each(t *testing.T, f func(t *testing.T, s snapshot.Store, url string)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.Kind, func(t *testing.T) {
			t.Parallel()
			b.each(t, f)
		})
	}
}

// each runs f on a fresh, migrated store of b.
func (b Backend) each(t *testing.T, f func(t *testing.T, s snapshot.Store, url string)) {
	t.Helper()
	s, url := b.New(t)
	f(t, s, url)
}

// Statements that write source rows the way the ObjectStack platform does
// (every column it sets, NULL where it leaves one), for Exec on either
// store. Writers never set a revision: the store's triggers do.
const (
	// UpsertMetadata writes a sys_metadata row: $1 id, $2 type, $3 name,
	// $4 organization_id, $5 package_id (nil for NULL), $6 state, $7 the
	// metadata text, $8 checksum (nil for NULL). An existing id gets the
	// new values and its version incremented, as the platform's saves do.
	UpsertMetadata = `INSERT INTO sys_metadata (id, type, name, organization_id, package_id, state, metadata, checksum,
  namespace, scope, strategy, version, source, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'default', 'platform', 'merge', 1, 'api', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
ON CONFLICT (id) DO UPDATE SET type = excluded.type, name = excluded.name, organization_id = excluded.organization_id,
  package_id = excluded.package_id, state = excluded.state, metadata = excluded.metadata, checksum = excluded.checksum,
  version = sys_metadata.version + 1, updated_at = CURRENT_TIMESTAMP`
	// UpsertSecret writes a sys_secret row: $1 id, $2 namespace, $3 key,
	// $4 ciphertext, with the platform's local key and algorithm.
	UpsertSecret = `INSERT INTO sys_secret (id, namespace, key, kms_key_id, alg, version, ciphertext, created_at, updated_at)
VALUES ($1, $2, $3, 'local:v1', 'aes-256-gcm', 1, $4, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
ON CONFLICT (id) DO UPDATE SET namespace = excluded.namespace, key = excluded.key, ciphertext = excluded.ciphertext,
  version = sys_secret.version + 1, rotated_at = CURRENT_TIMESTAMP, updated_at = CURRENT_TIMESTAMP`
)

// Exec runs one statement on the store at url (postgres:// or sqlite://)
// on a connection of its own, failing the test on error. Placeholders are
// $1, $2, … on both stores, so one statement text serves both.
func Exec(t testing.TB, url, query string, args ...any) {
	t.Helper()
	c := Connect(t, url)
	defer c.Close()
	c.Exec(t, query, args...)
}

// Conn is a plain-SQL connection to either store, for writing rows the way
// an application (or psql) does.
type Conn struct {
	pg *pgx.Conn
	db *sql.DB
	sq *sql.Conn
}

// Connect opens a Conn to the store at url; it is closed when the test ends
// (Close earlier is fine).
func Connect(t testing.TB, url string) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &Conn{}
	if strings.HasPrefix(url, "sqlite://") {
		path, err := sqlite.Path(url)
		if err != nil {
			t.Fatal(err)
		}
		c.db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(120000)&_pragma=journal_mode(WAL)")
		if err == nil {
			c.sq, err = c.db.Conn(ctx)
		}
		if err != nil {
			t.Fatalf("snapshottest: open %s: %v", url, err)
		}
	} else {
		var err error
		c.pg, err = pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("snapshottest: connect %s: %v", redact.URL(url), err)
		}
	}
	t.Cleanup(c.Close)
	return c
}

// Close closes the connection; a second Close does nothing.
func (c *Conn) Close() {
	if c.pg != nil {
		_ = c.pg.Close(context.Background())
		c.pg = nil
	}
	if c.db != nil {
		_ = c.sq.Close()
		_ = c.db.Close()
		c.db, c.sq = nil, nil
	}
}

// Try runs one statement and returns its error (for writes expected to
// fail, or for callers that must not call t.Fatal off the test goroutine).
func (c *Conn) Try(ctx context.Context, query string, args ...any) error {
	if c.pg != nil {
		_, err := c.pg.Exec(ctx, query, args...)
		return err
	}
	_, err := c.sq.ExecContext(ctx, query, args...)
	return err
}

// TryN runs one statement and returns how many rows it affected.
func (c *Conn) TryN(ctx context.Context, query string, args ...any) (int64, error) {
	if c.pg != nil {
		tag, err := c.pg.Exec(ctx, query, args...)
		return tag.RowsAffected(), err
	}
	res, err := c.sq.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Int runs a query returning one integer (a count), failing the test on
// error.
func (c *Conn) Int(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var n int64
	var err error
	if c.pg != nil {
		err = c.pg.QueryRow(ctx, query, args...).Scan(&n)
	} else {
		err = c.sq.QueryRowContext(ctx, query, args...).Scan(&n)
	}
	if err != nil {
		t.Fatalf("snapshottest: query %q: %v", query, err)
	}
	return n
}

// Exec runs one statement, failing the test on error.
func (c *Conn) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Try(ctx, query, args...); err != nil {
		t.Fatalf("snapshottest: exec %q: %v", query, err)
	}
}

// Begin starts a transaction on c (BEGIN IMMEDIATE on SQLite: the write
// lock up front, as writers should). End it with Commit or Rollback (Exec
// "COMMIT"/"ROLLBACK").
func (c *Conn) Begin(ctx context.Context) error {
	if c.pg != nil {
		return c.Try(ctx, "BEGIN")
	}
	return c.Try(ctx, "BEGIN IMMEDIATE")
}

// Commit commits the transaction begun with Begin.
func (c *Conn) Commit(ctx context.Context) error { return c.Try(ctx, "COMMIT") }

// Rollback rolls back the transaction begun with Begin.
func (c *Conn) Rollback(ctx context.Context) error { return c.Try(ctx, "ROLLBACK") }
