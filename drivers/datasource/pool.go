package datasource

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/reconcile"
)

// Pool is an open datasource: the datasource registry's live instance.
// Exactly one of PG and SQL is set, by driver.
type Pool struct {
	name   string
	driver string
	pg     *pgxpool.Pool
	db     *sql.DB
	share  *share // its part of the connection budget (postgres)
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

// Close closes the pool and every connection in it. It is safe on a nil
// *Pool.
func (p *Pool) Close() error {
	if p == nil {
		return nil
	}
	if p.pg != nil {
		p.pg.Close() // waits for its connections to close
	}
	if p.share != nil {
		p.share.close()
		p.share = nil
	}
	if p.db != nil {
		return p.db.Close()
	}
	return nil
}

var _ reconcile.Revalidator = (*Pool)(nil)

// Revalidate pings the database through the pool (a new connection when
// none is idle or the idle one is dead, so that a password revoked since
// shows): an
// authentication failure is a reconcile.Refused error, an unreachable
// server a reconcile.Transient one.
func (p *Pool) Revalidate(ctx context.Context) error {
	switch {
	case p.pg != nil:
		err := p.pg.Ping(ctx)
		if err != nil && ctx.Err() == nil {
			// An idle connection the server ended fails once and leaves
			// the pool: the second ping connects anew, and says why.
			err = p.pg.Ping(ctx)
		}
		if err != nil {
			cc := p.pg.Config().ConnConfig
			return classifyPG(ctx, p.name, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), err, cc.Password)
		}
	case p.db != nil:
		if err := p.db.PingContext(ctx); err != nil {
			return reconcile.Transient(err, "datasource %s: ping: %v", p.name, err)
		}
	}
	return nil
}

// String describes the pool.
func (p *Pool) String() string { return fmt.Sprintf("datasource %s (%s)", p.name, p.driver) }
