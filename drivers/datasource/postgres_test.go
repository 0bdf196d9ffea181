package datasource_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// pgFixture is a private cluster demanding passwords over TCP, with role
// ds_user (password canary) owning database dsdb.
type pgFixture struct {
	cluster *testdb.Cluster
	log     *slog.Logger
	logs    *proctest.Buffer
	m       *datasource.Materializer
}

func setupPG(t *testing.T) pgFixture {
	t.Helper()
	c := testdb.NewCluster(t, testdb.WithPasswordAuth())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, stmt := range []string{
		"CREATE ROLE ds_user LOGIN PASSWORD '" + canary + "'",
		"CREATE DATABASE dsdb OWNER ds_user",
	} {
		if err := testdb.Exec(ctx, c.URL("postgres"), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	log, logs := debugLogger()
	return pgFixture{cluster: c, log: log, logs: logs, m: datasource.New(datasource.Options{Logger: log})}
}

// sessions counts ds_user's sessions on the server.
func (f pgFixture) sessions(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = 'ds_user'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fields is a record's config in the platform's discrete form.
func fields(port int, db string) string {
	return fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"database":%q,"username":"ds_user","sslmode":"disable"}`, port, db)
}

func TestPostgres(t *testing.T) {
	f := setupPG(t)
	port := f.cluster.Port()
	target := fmt.Sprintf("127.0.0.1:%d", port)
	ctx := context.Background()

	t.Run("right password is ready", func(t *testing.T) {
		for _, config := range []string{
			fields(port, "dsdb"),
			fmt.Sprintf(`{"host":"127.0.0.1","port":"%d","database":"dsdb","user":"ds_user","ssl":false}`, port),
			fmt.Sprintf(`{"url":%q}`, f.cluster.TCPURL("ds_user", "dsdb")),
		} {
			inst, err := f.m.Materialize(ctx, desired(record("postgres", config, "", true), canary))
			if err != nil {
				t.Fatalf("Materialize(%s): %v", config, err)
			}
			p := inst.(*datasource.Pool)
			var who string
			if err := p.PG().QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != "ds_user" {
				t.Fatalf("current_user = %q, %v", who, err)
			}
			if p.SQL() != nil || p.Driver() != "postgres" || p.Name() != "crm" {
				t.Fatalf("pool = %v", p)
			}
			if err := inst.Close(); err != nil {
				t.Fatal(err)
			}
			if err := p.PG().Ping(ctx); err == nil {
				t.Fatal("pool still usable after Close")
			}
		}
	})
	t.Run("wrong password is refused", func(t *testing.T) {
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), "", true), "wrong-"+canary))
		assertClass(t, inst, err, reconcile.ClassRefused, `datasource crm: refused by server `+target+
			`: password authentication failed for user "ds_user" (SQLSTATE 28P01, invalid authorization specification)`)
	})
	t.Run("no password is refused", func(t *testing.T) {
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), "", true), ""))
		assertClass(t, inst, err, reconcile.ClassRefused, "datasource crm: refused by server "+target+": …")
	})
	t.Run("missing database is held", func(t *testing.T) {
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "nodb"), "", true), canary))
		assertClass(t, inst, err, reconcile.ClassInvalid, `datasource crm: refused by server `+target+
			`: database "nodb" does not exist (SQLSTATE 3D000, invalid catalog name)`)
	})
	t.Run("wrong port is transient", func(t *testing.T) {
		p := proctest.FreePort(t)
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(p, "dsdb"), "", true), canary))
		assertClass(t, inst, err, reconcile.ClassTransient, fmt.Sprintf("datasource crm: connect 127.0.0.1:%d: …", p))
	})
	t.Run("canceled apply is transient", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), "", true), canary))
		assertClass(t, inst, err, reconcile.ClassTransient, "datasource crm: connect "+target+": context canceled")
	})
	t.Run("pool settings honoured", func(t *testing.T) {
		for _, pool := range []string{
			`{"maxConns":7,"minConns":2,"maxConnLifetime":"30m","maxConnIdleTime":"5m","healthCheckPeriod":"45s"}`,
			`{"max":7,"min":2,"idleTimeoutMillis":300000,"connectionTimeoutMillis":3000}`,
		} {
			inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), pool, true), canary))
			if err != nil {
				t.Fatal(err)
			}
			cfg := inst.(*datasource.Pool).PG().Config()
			inst.Close()
			if cfg.MaxConns != 7 || cfg.MinConns != 2 || cfg.MaxConnIdleTime != 5*time.Minute || cfg.ConnConfig.ConnectTimeout > 10*time.Second {
				t.Fatalf("%s: pool config = max %d min %d idle %v connect %v", pool, cfg.MaxConns, cfg.MinConns, cfg.MaxConnIdleTime, cfg.ConnConfig.ConnectTimeout)
			}
		}
	})
	t.Run("sessions on the server, closed on evict", func(t *testing.T) {
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), `{"maxConns":5,"minConns":3}`, true), canary))
		if err != nil {
			t.Fatal(err)
		}
		proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "minConns sessions on the server",
			func() bool { return f.sessions(t) == 3 })
		if err := inst.Close(); err != nil {
			t.Fatal(err)
		}
		proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "no sessions after Close",
			func() bool { return f.sessions(t) == 0 })
	})
	t.Run("a refused password opens one session attempt, not minConns", func(t *testing.T) {
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), `{"maxConns":20,"minConns":20}`, true), "wrong"))
		assertClass(t, inst, err, reconcile.ClassRefused, "datasource crm: refused by server …")
		if n := f.sessions(t); n != 0 {
			t.Fatalf("%d sessions after a refused login", n)
		}
	})
	t.Run("revalidation sees a password revoked", func(t *testing.T) {
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), "", true), canary))
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		rv := inst.(reconcile.Revalidator)
		if err := rv.Revalidate(ctx); err != nil {
			t.Fatalf("Revalidate of a working pool: %v", err)
		}
		admin := f.cluster.URL("postgres")
		for _, stmt := range []string{"ALTER ROLE ds_user PASSWORD 'revoked'",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'ds_user'"} {
			if err := testdb.Exec(ctx, admin, stmt); err != nil {
				t.Fatal(err)
			}
		}
		defer func() { _ = testdb.Exec(ctx, admin, "ALTER ROLE ds_user PASSWORD '"+canary+"'") }()
		proctest.Eventually(t, 10*time.Second, 20*time.Millisecond, "the terminated sessions gone", func() bool { return f.sessions(t) == 0 })
		err = rv.Revalidate(ctx)
		if c, r := reconcile.Classify(err); c != reconcile.ClassRefused || !strings.Contains(r, "password authentication failed") || strings.Contains(r, canary) {
			t.Fatalf("Revalidate after the password changed: %v %q", c, r)
		}
	})
	t.Run("stopped server is transient", func(t *testing.T) {
		f.cluster.Stop()
		defer f.cluster.Start()
		inst, err := f.m.Materialize(ctx, desired(record("postgres", fields(port, "dsdb"), "", true), canary))
		assertClass(t, inst, err, reconcile.ClassTransient, "datasource crm: connect "+target+": …")
	})
	if strings.Contains(f.logs.String(), canary) {
		t.Fatalf("debug logs leak the password:\n%s", f.logs)
	}
	if !strings.Contains(f.logs.String(), "opening postgres pool") {
		t.Fatalf("expected debug logs, got:\n%s", f.logs)
	}
}
