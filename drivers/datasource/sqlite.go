package datasource

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// openSQLite opens an existing database file inside Options.SQLiteDir,
// read-write, never creating it, with no driver parameter from the row.
func (m *Materializer) openSQLite(ctx context.Context, name string, rec Record, log *slog.Logger) (*Pool, error) {
	file, err := resolveSQLite(m.opts.SQLiteDir, rec.SQLitePath)
	if err != nil {
		if errors.Is(err, metadata.ErrInvalid) {
			return nil, reconcile.Invalid(err, "datasource %s: %v", name, err)
		}
		return nil, reconcile.Transient(err, "datasource %s: %v", name, err)
	}
	log.DebugContext(ctx, "opening sqlite database", slog.String("path", file))
	db, err := sql.Open("sqlite", sqliteDSN(file))
	if err != nil {
		return nil, reconcile.Invalid(err, "datasource %s: config.path: %v", name, err)
	}
	p := rec.Pool
	db.SetMaxOpenConns(int(p.MaxConns))
	db.SetMaxIdleConns(max(int(p.MinConns), 1))
	if p.MaxConnLifetime > 0 {
		db.SetConnMaxLifetime(p.MaxConnLifetime)
	}
	if p.MaxConnIdleTime > 0 {
		db.SetConnMaxIdleTime(p.MaxConnIdleTime)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		_ = db.Close()
		return nil, classifySQLite(ctx, name, rec.SQLitePath, err)
	}
	return &Pool{name: name, driver: DriverSQLite, db: db}, nil
}

func classifySQLite(ctx context.Context, name, path string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return reconcile.Invalid(err, "datasource %s: %s is not a SQLite database", name, path)
		case sqlite3.SQLITE_AUTH, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY:
			return reconcile.Refused(err, "datasource %s: open %s: %v", name, path, err)
		}
	}
	if ctx.Err() != nil {
		return reconcile.Transient(err, "datasource %s: open %s: %v", name, path, ctx.Err())
	}
	return reconcile.Transient(err, "datasource %s: open %s: %v", name, path, err)
}
