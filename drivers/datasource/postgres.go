package datasource

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// openPostgres checks that one connection authenticates and answers, then
// opens the pool. Checking with one connection first means a refused or
// silent server costs one socket, not pool.minConns of them, and nothing
// keeps running in the background after a failure.
func (m *Materializer) openPostgres(ctx context.Context, key, name string, rec Record, password string, log *slog.Logger) (_ *Pool, err error) {
	pc, err := pgxpool.ParseConfig(rec.Postgres.ConnString)
	if err != nil {
		return nil, reconcile.Invalid(err, "datasource %s: config: %s", name, redact.Secrets(err.Error(), password))
	}
	if !m.opts.AllowLocal {
		if why := localTarget(rec.Postgres.ConnString, pc); why != "" {
			return nil, reconcile.Invalid(errLocal, "datasource %s: %s; local connections need %s", name, why, AllowLocalKey)
		}
	}
	// The password comes from the credential alone, never from the
	// environment or a passfile.
	pc.ConnConfig.Password = password
	pc.ConnConfig.AfterNetConnect = guardCleartext
	for k, v := range rec.Postgres.RuntimeParams {
		pc.ConnConfig.RuntimeParams[k] = v
	}
	timeout := m.opts.ConnectTimeout
	if t := rec.Pool.ConnectTimeout; t > 0 && t < timeout {
		timeout = t
	}
	if t := pc.ConnConfig.ConnectTimeout; t > 0 && t < timeout {
		timeout = t
	}
	pc.ConnConfig.ConnectTimeout = timeout
	p := rec.Pool
	got, freed := m.budget.reserve(key, int(p.MinConns))
	if got == 0 {
		return nil, reconcile.HeldUntil(freed, errBudget, "datasource %s: no connection left in the budget of %d shared by all datasources (%s)",
			name, m.opts.MaxTotalConns, MaxTotalConnsKey)
	}
	sh := &share{b: m.budget, key: key, reserved: got}
	defer func() {
		if err != nil {
			sh.close()
		}
	}()
	pc.ConnConfig.DialFunc = sh.dialer(pc.ConnConfig.DialFunc)
	pc.MaxConns, pc.MinConns = p.MaxConns, min(p.MinConns, int32(got))
	if p.MaxConnLifetime > 0 {
		pc.MaxConnLifetime = p.MaxConnLifetime
	}
	if p.MaxConnIdleTime > 0 {
		pc.MaxConnIdleTime = p.MaxConnIdleTime
	}
	if p.HealthCheckPeriod > 0 {
		pc.HealthCheckPeriod = p.HealthCheckPeriod
	}
	target := net.JoinHostPort(pc.ConnConfig.Host, strconv.Itoa(int(pc.ConnConfig.Port)))
	log.DebugContext(ctx, "opening postgres pool", slog.String("host", pc.ConnConfig.Host), slog.Int("port", int(pc.ConnConfig.Port)),
		slog.String("database", pc.ConnConfig.Database), slog.String("user", pc.ConnConfig.User),
		slog.Int("max_conns", int(pc.MaxConns)), slog.Int("min_conns", int(pc.MinConns)), slog.Int("reserved_conns", got))

	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig.Copy())
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(context.WithoutCancel(ctx))
	}
	if err != nil {
		err = classifyPG(ctx, name, target, err, password)
		log.DebugContext(ctx, "postgres datasource not opened", slog.String("reason", err.Error()))
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, reconcile.Invalid(err, "datasource %s: config: %s", name, redact.Secrets(err.Error(), password))
	}
	return &Pool{name: name, driver: DriverPostgres, pg: pool, share: sh}, nil
}

// sqlstateClasses names the SQLSTATE classes a reason may show.
var sqlstateClasses = map[string]string{
	"08": "connection exception",
	"28": "invalid authorization specification",
	"3D": "invalid catalog name",
	"42": "syntax error or access rule violation",
	"53": "insufficient resources",
	"57": "operator intervention",
}

// classifyPG maps a connect or ping error to a failure class. Reasons name
// the datasource, the server and the SQLSTATE with its class.
func classifyPG(ctx context.Context, name, target string, err error, password string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := redact.Secrets(pgErr.Message, password)
		code := pgErr.Code
		state := "SQLSTATE " + code
		if class, ok := sqlstateClasses[code[:min(2, len(code))]]; ok {
			state += ", " + class
		}
		switch {
		case pgerrcode.IsInvalidAuthorizationSpecification(code), code == pgerrcode.InsufficientPrivilege:
			return reconcile.Refused(err, "datasource %s: refused by server %s: %s (%s)", name, target, msg, state)
		case code == pgerrcode.InvalidCatalogName:
			return reconcile.Invalid(err, "datasource %s: refused by server %s: %s (%s)", name, target, msg, state)
		default:
			return reconcile.Transient(err, "datasource %s: server %s: %s (%s)", name, target, msg, state)
		}
	}
	if errors.Is(err, errCleartext) {
		return reconcile.Refused(err, "datasource %s: server %s: %v", name, target, errCleartext)
	}
	if ctx.Err() != nil {
		return reconcile.Transient(err, "datasource %s: connect %s: %v", name, target, ctx.Err())
	}
	return reconcile.Transient(err, "datasource %s: connect %s: %s", name, target, redact.Secrets(connectCause(err), password))
}

// connectCause is the innermost useful text of a connect error (pgconn
// prefixes it with the user and database, which the reason already shows
// through the target).
func connectCause(err error) string {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		err = ce.Unwrap()
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
