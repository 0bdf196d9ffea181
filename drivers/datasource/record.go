package datasource

import (
	"github.com/objectstack-fleet/reconciler/metadata"
)

// The drivers.
const (
	DriverPostgres = "postgres"
	DriverSQLite   = "sqlite"
)

// Record is a decoded datasource record: the body of a sys_metadata row of
// type datasource. Members the reconciler does not use (label, schemaMode,
// external, origin, ssl, description, autoConnect) are ignored here; the
// credential named by external was resolved before the body reaches this
// package.
type Record struct {
	// Name is the record's name ("" when the body has none).
	Name   string
	Driver string
	// Active is false when the record says "active": false.
	Active bool
	// Postgres is set for driver postgres.
	Postgres *PostgresConfig
	// SQLitePath is config.path (or config.filename) for driver sqlite, as
	// written; it is checked against the allowed directory when opened.
	SQLitePath string
	Pool       PoolSettings
}

// Limits are the caps a record is checked against.
type Limits struct {
	// MaxConns caps pool.maxConns and pool.minConns.
	MaxConns int32
	// DefaultMaxConns is the pool size when the record sets none.
	DefaultMaxConns int32
}

// ParseRecord validates a datasource record. Faults wrap metadata.ErrInvalid and
// name the member ("config.host is required", "pool.maxConns (3000)
// exceeds the cap of 50 connections per datasource").
func ParseRecord(body []byte, lim Limits) (Record, error) {
	top, err := metadata.ReadBody(body, "datasource record")
	if err != nil {
		return Record{}, err
	}
	var r Record
	if r.Name, _, err = top.String("name"); err != nil {
		return Record{}, err
	}
	active, hasActive, err := top.Bool("active")
	if err != nil {
		return Record{}, err
	}
	r.Active = !hasActive || active
	if r.Driver, err = top.Required("driver"); err != nil {
		return Record{}, err
	}
	cfg, _, err := top.Object("config")
	if err != nil {
		return Record{}, err
	}
	switch r.Driver {
	case DriverPostgres, "postgresql", "pg":
		r.Driver = DriverPostgres
		if r.Postgres, err = parsePostgres(cfg); err != nil {
			return Record{}, err
		}
	case DriverSQLite:
		if r.SQLitePath, err = parseSQLitePath(cfg); err != nil {
			return Record{}, err
		}
	default:
		return Record{}, metadata.Faultf("", "unknown driver %q (want postgres or sqlite)", r.Driver)
	}
	pool, _, err := top.Object("pool")
	if err != nil {
		return Record{}, err
	}
	if r.Pool, err = parsePool(pool, lim); err != nil {
		return Record{}, err
	}
	return r, nil
}
