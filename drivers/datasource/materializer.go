package datasource

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// ErrInactive is the cause of materializing an inactive datasource.
var ErrInactive = errors.New("datasource inactive")

// Options configure a Materializer.
type Options struct {
	// Logger; default discards. Passwords are never logged.
	Logger *slog.Logger
}

// Materializer opens datasource pools. It is safe for concurrent use.
type Materializer struct {
	log *slog.Logger
}

var _ reconcile.Materializer = (*Materializer)(nil)

// New returns a Materializer. It does no I/O.
func New(opts Options) *Materializer {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Materializer{log: log}
}

// Pool is an open datasource: the datasource registry's live instance.
// Exactly one of PG and SQL is set, by driver.
type Pool struct {
	name   string
	driver string
	pg     *pgxpool.Pool
	db     *sql.DB
}

// Name returns the datasource's name.
func (p *Pool) Name() string { return p.name }

// Driver returns "postgres" or "sqlite".
func (p *Pool) Driver() string { return p.driver }

// PG returns the pgx pool of a postgres datasource (nil otherwise).
func (p *Pool) PG() *pgxpool.Pool { return p.pg }

// SQL returns the database/sql handle of a sqlite datasource (nil
// otherwise).
func (p *Pool) SQL() *sql.DB { return p.db }

// Close closes the pool and every connection in it.
func (p *Pool) Close() error {
	if p.pg != nil {
		p.pg.Close()
	}
	if p.db != nil {
		return p.db.Close()
	}
	return nil
}

// Materialize opens d's pool and pings it; see the package documentation
// for the outcomes. It returns a *Pool.
func (m *Materializer) Materialize(ctx context.Context, d reconcile.Desired) (registry.Instance, error) {
	name := d.Key
	var driver string
	var config, pool []byte
	active := true
	if r := d.Datasource; r != nil {
		name, driver, config, pool, active = r.Name, r.Driver, r.Config, r.Pool, r.Active
	} else {
		r, err := decodeRow(d.Body)
		if err != nil {
			return nil, reconcile.Invalid(err, "%s", errors.Unwrap(err).Error())
		}
		driver, config, pool = r.Driver, r.Config, r.Pool
		active = r.Active == nil || *r.Active
	}
	if !active {
		return nil, reconcile.Invalid(ErrInactive, "datasource inactive")
	}
	cfg, err := parseConfig(driver, config, pool)
	if err != nil {
		return nil, reconcile.Invalid(err, "%s", err.Error())
	}
	log := m.log.With(slog.String("kind", string(d.Kind)), slog.String("key", d.Key), slog.Int64("revision", d.Revision))
	switch cfg.Driver {
	case DriverPostgres:
		return m.openPostgres(ctx, name, cfg, d.Secret.Reveal(), log)
	default:
		return m.openSQLite(ctx, name, cfg, log)
	}
}

func (m *Materializer) openPostgres(ctx context.Context, name string, cfg Config, password string, log *slog.Logger) (*Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, reconcile.Invalid(err, "config: %v", err)
	}
	// The password comes from the credential alone, never from the
	// environment or a passfile.
	pc.ConnConfig.Password = password
	p := cfg.Pool
	if p.MaxConns > 0 {
		pc.MaxConns = p.MaxConns
	}
	if p.MinConns > pc.MaxConns {
		return nil, reconcile.Invalid(nil, "pool.minConns (%d) must not exceed the pool size (%d)", p.MinConns, pc.MaxConns)
	}
	pc.MinConns = p.MinConns
	if p.MaxConnLifetime > 0 {
		pc.MaxConnLifetime = p.MaxConnLifetime
	}
	if p.MaxConnIdleTime > 0 {
		pc.MaxConnIdleTime = p.MaxConnIdleTime
	}
	if p.HealthCheckPeriod > 0 {
		pc.HealthCheckPeriod = p.HealthCheckPeriod
	}
	log.DebugContext(ctx, "opening postgres pool", slog.String("host", pc.ConnConfig.Host), slog.Int("port", int(pc.ConnConfig.Port)),
		slog.String("database", pc.ConnConfig.Database), slog.String("user", pc.ConnConfig.User), slog.Int("max_conns", int(pc.MaxConns)))
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, reconcile.Invalid(err, "config: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		err = classifyPG(ctx, err, password)
		log.DebugContext(ctx, "postgres pool refused", slog.String("reason", err.Error()))
		return nil, err
	}
	return &Pool{name: name, driver: DriverPostgres, pg: pool}, nil
}

// classifyPG maps a connect or ping error to a failure class.
func classifyPG(ctx context.Context, err error, password string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := redact.Secrets(pgErr.Message, password)
		switch {
		case pgErr.Code == "28P01" || pgErr.Code == "28000":
			return reconcile.Refused(err, "refused by server: %s (%s)", msg, pgErr.Code)
		case pgErr.Code == "3D000" || pgErr.Code == "42501":
			return reconcile.Invalid(err, "refused by server: %s (%s)", msg, pgErr.Code)
		default:
			return reconcile.Transient(err, "server error: %s (%s)", msg, pgErr.Code)
		}
	}
	if ctx.Err() != nil {
		return reconcile.Transient(err, "connect: %v", ctx.Err())
	}
	return reconcile.Transient(err, "connect: %s", redact.Secrets(err.Error(), password))
}

func (m *Materializer) openSQLite(ctx context.Context, name string, cfg Config, log *slog.Logger) (*Pool, error) {
	log.DebugContext(ctx, "opening sqlite database", slog.String("path", cfg.Path))
	db, err := sql.Open("sqlite", cfg.Path)
	if err != nil {
		return nil, reconcile.Invalid(err, "config.path: %v", err)
	}
	p := cfg.Pool
	if p.MaxConns > 0 {
		db.SetMaxOpenConns(int(p.MaxConns))
	}
	if p.MinConns > 0 {
		db.SetMaxIdleConns(int(p.MinConns))
	}
	if p.MaxConnLifetime > 0 {
		db.SetConnMaxLifetime(p.MaxConnLifetime)
	}
	if p.MaxConnIdleTime > 0 {
		db.SetConnMaxIdleTime(p.MaxConnIdleTime)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		_ = db.Close()
		return nil, classifySQLite(ctx, cfg.Path, err)
	}
	return &Pool{name: name, driver: DriverSQLite, db: db}, nil
}

func classifySQLite(ctx context.Context, path string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return reconcile.Invalid(err, "%s is not a SQLite database", path)
		case sqlite3.SQLITE_AUTH, sqlite3.SQLITE_PERM:
			return reconcile.Refused(err, "open %s: %v", path, err)
		}
	}
	if ctx.Err() != nil {
		return reconcile.Transient(err, "open %s: %v", path, ctx.Err())
	}
	return reconcile.Transient(err, "open %s: %v", path, err)
}

// String describes the pool.
func (p *Pool) String() string { return fmt.Sprintf("datasource %s (%s)", p.name, p.driver) }
