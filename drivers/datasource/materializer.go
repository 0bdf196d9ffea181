package datasource

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// ErrInactive is the cause of materializing an inactive datasource.
var ErrInactive = errors.New("datasource inactive")

// The defaults of Options.
const (
	DefaultMaxConns        int32 = 50
	DefaultPoolSize        int32 = 10
	DefaultConnectTimeout        = 10 * time.Second
	maxConnectTimeoutLimit       = 10 * time.Minute
)

// Options configure a Materializer. Zero values take the defaults.
type Options struct {
	// Logger; default discards. Passwords are never logged.
	Logger *slog.Logger
	// SQLiteDir (datasource.sqlite_dir) is the one directory sqlite
	// datasource files may lie in; relative paths are taken relative to it
	// and symbolic links must stay inside it. Empty, the default, allows
	// no sqlite file: such datasources are held naming the key.
	SQLiteDir string
	// MaxConns (datasource.max_conns) caps a record's pool.maxConns and
	// pool.minConns (default 50); a record above it is held naming the cap.
	MaxConns int32
	// DefaultPoolSize is the pool size of a record that sets none
	// (default 10, the platform's; never above MaxConns).
	DefaultPoolSize int32
	// ConnectTimeout bounds one materialization's connect and ping, and
	// each later connection attempt of the pool (default 10s).
	ConnectTimeout time.Duration
	// MaxTotalConns (datasource.max_total_conns) is the budget of open
	// connections all postgres pools share (default 16): a pool reserves
	// its min (at least one; the min shrinks to what is left) and draws
	// connections above it while they are open; a datasource that cannot
	// get one connection is held naming the budget, and retried when
	// connections come back.
	MaxTotalConns int
	// AllowLocal (datasource.allow_local) lets rows name a Unix socket
	// or a URL without a host (the driver's local defaults); off, such a
	// row is held naming the key. TCP hosts are always allowed.
	AllowLocal bool
}

// Materializer opens datasource pools. It is safe for concurrent use.
type Materializer struct {
	log    *slog.Logger
	opts   Options
	budget *budget
}

var _ reconcile.Materializer = (*Materializer)(nil)

// New returns a Materializer. It does no I/O.
func New(opts Options) *Materializer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.DefaultPoolSize <= 0 {
		opts.DefaultPoolSize = DefaultPoolSize
	}
	opts.DefaultPoolSize = min(opts.DefaultPoolSize, opts.MaxConns)
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	opts.ConnectTimeout = min(opts.ConnectTimeout, maxConnectTimeoutLimit)
	if opts.MaxTotalConns <= 0 {
		opts.MaxTotalConns = DefaultMaxTotalConns
	}
	return &Materializer{log: opts.Logger, opts: opts, budget: newBudget(opts.MaxTotalConns)}
}

// ConnsInUse is how many connections the pools hold or have reserved, out
// of Options.MaxTotalConns.
func (m *Materializer) ConnsInUse() int { return m.budget.inUse() }

// Limits returns the caps records are checked against.
func (m *Materializer) Limits() Limits {
	return Limits{MaxConns: m.opts.MaxConns, DefaultMaxConns: m.opts.DefaultPoolSize}
}

// Materialize opens d's pool and pings it; see the package documentation
// for the outcomes. It builds from d.Body (the record) and d.Secret (the
// password) only. On success the instance is a *Pool; on failure it is a
// nil interface, never a nil *Pool.
func (m *Materializer) Materialize(ctx context.Context, d reconcile.Desired) (registry.Instance, error) {
	rec, err := ParseRecord(d.Body, m.Limits())
	if err != nil {
		return nil, reconcile.Invalid(err, "%s", err.Error())
	}
	if !rec.Active {
		return nil, reconcile.Invalid(ErrInactive, "datasource inactive")
	}
	name := rec.Name
	if name == "" && d.Metadata != nil {
		name = d.Metadata.Name
	}
	if name == "" {
		name = d.Key
	}
	log := m.log.With(slog.String("kind", string(d.Kind)), slog.String("key", d.Key), slog.Int64("revision", d.Revision))
	// The bound on everything this call waits for: connect, TLS,
	// authentication, the ping.
	ctx, cancel := context.WithTimeout(ctx, m.opts.ConnectTimeout)
	defer cancel()
	var p *Pool
	switch rec.Driver {
	case DriverPostgres:
		p, err = m.openPostgres(ctx, d.Key, name, rec, d.Secret.Reveal(), log)
	default:
		p, err = m.openSQLite(ctx, name, rec, log)
	}
	if err != nil || p == nil {
		if err == nil {
			err = reconcile.Transient(nil, "datasource %s: no pool", name)
		}
		return nil, err
	}
	return p, nil
}
