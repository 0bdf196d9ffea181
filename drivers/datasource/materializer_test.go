package datasource_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const canary = "canary-pw-9d41e7"

func desired(driver, config, pool string, active bool, secret string) reconcile.Desired {
	row := &snapshot.DatasourceRow{Name: "crm", Driver: driver, Config: json.RawMessage(config),
		Pool: json.RawMessage(pool), External: json.RawMessage(`{"credentialsRef":"crm-db"}`), Active: active, Revision: 5}
	b, _ := json.Marshal(map[string]any{"driver": driver, "config": row.Config, "pool": row.Pool, "external": row.External, "active": active})
	return reconcile.Desired{Kind: registry.KindDatasource, Key: "crm", Revision: 5, Body: b,
		Datasource: row, CredentialRef: "crm-db", Secret: snapshot.NewSecret(secret)}
}

func debugLogger() (*slog.Logger, *proctest.Buffer) {
	buf := proctest.NewBuffer()
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func assertClass(t *testing.T, err error, class reconcile.Class, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Materialize succeeded, want %v %q", class, reason)
	}
	c, r := reconcile.Classify(err)
	ok := r == reason
	if p, cut := strings.CutSuffix(reason, "…"); cut {
		ok = strings.HasPrefix(r, p)
	}
	if c != class || !ok {
		t.Fatalf("got %v %q, want %v %q", c, r, class, reason)
	}
	if strings.Contains(fmt.Sprintf("%v %+v", err, err), canary) {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, driver, config, pool string
		active                     bool
		reason                     string
	}{
		{"unknown driver", "mysql", `{}`, `{}`, true, `unknown driver "mysql" (want postgres or sqlite)`},
		{"inactive", "postgres", `{"host":"h"}`, `{}`, false, "datasource inactive"},
		{"config not object", "postgres", `[]`, `{}`, true, "config must be a JSON object"},
		{"missing host", "postgres", `{"database":"d"}`, `{}`, true, "config.host is required"},
		{"port string", "postgres", `{"host":"h","port":"5432"}`, `{}`, true, "config.port must be an integer"},
		{"port range", "postgres", `{"host":"h","port":70000}`, `{}`, true, "config.port must be between 1 and 65535"},
		{"bad sslmode", "postgres", `{"host":"h","sslmode":"maybe"}`, `{}`, true, `config.sslmode "maybe" is not one of disable, allow, prefer, require, verify-ca, verify-full`},
		{"password key", "postgres", `{"host":"h","password":"x"}`, `{}`, true, "config.password is not a known setting"},
		{"url with password", "postgres", `{"url":"postgres://u:` + canary + `@h/db"}`, `{}`, true, "config.url must not hold a password (it comes from the credential)"},
		{"url password param", "postgres", `{"url":"postgres://u@h/db?password=` + canary + `"}`, `{}`, true, "config.url must not hold a password (it comes from the credential)"},
		{"url and host", "postgres", `{"url":"postgres://u@h/db","host":"h"}`, `{}`, true, "config.url and config.host are exclusive"},
		{"url scheme", "postgres", `{"url":"mysql://u@h/db"}`, `{}`, true, "config.url must be a postgres:// URL"},
		{"pool unknown key", "postgres", `{"host":"h"}`, `{"max":3}`, true, "pool.max is not a known setting"},
		{"pool min over max", "postgres", `{"host":"h"}`, `{"maxConns":2,"minConns":3}`, true, "pool.minConns (3) must not exceed pool.maxConns (2)"},
		{"pool zero max", "postgres", `{"host":"h"}`, `{"maxConns":0}`, true, "pool.maxConns must be between 1 and 10000"},
		{"pool bad duration", "postgres", `{"host":"h"}`, `{"maxConnLifetime":"forever"}`, true, `pool.maxConnLifetime must be a positive duration like "5s"`},
		{"pool duration number", "postgres", `{"host":"h"}`, `{"maxConnIdleTime":30}`, true, `pool.maxConnIdleTime must be a duration like "5s"`},
		{"sqlite missing path", "sqlite", `{}`, `{}`, true, "config.path is required"},
		{"sqlite unknown key", "sqlite", `{"path":"x","url":"y"}`, `{}`, true, "config.url is not a known setting"},
	}
	m := datasource.New(datasource.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := m.Materialize(context.Background(), desired(tt.driver, tt.config, tt.pool, tt.active, canary))
			assertClass(t, err, reconcile.ClassInvalid, tt.reason)
		})
	}
}

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

func fields(port int, db string) string {
	return fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"database":%q,"user":"ds_user","sslmode":"disable"}`, port, db)
}

func TestPostgres(t *testing.T) {
	f := setupPG(t)
	port := f.cluster.Port()
	ctx := context.Background()

	t.Run("right password is ready", func(t *testing.T) {
		for _, config := range []string{
			fields(port, "dsdb"),
			fmt.Sprintf(`{"url":%q}`, f.cluster.TCPURL("ds_user", "dsdb")),
		} {
			inst, err := f.m.Materialize(ctx, desired("postgres", config, `{}`, true, canary))
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
		_, err := f.m.Materialize(ctx, desired("postgres", fields(port, "dsdb"), `{}`, true, "wrong-"+canary))
		assertClass(t, err, reconcile.ClassRefused, `refused by server: password authentication failed for user "ds_user" (28P01)`)
	})
	t.Run("no password is refused", func(t *testing.T) {
		_, err := f.m.Materialize(ctx, desired("postgres", fields(port, "dsdb"), `{}`, true, ""))
		assertClass(t, err, reconcile.ClassRefused, "refused by server: …")
	})
	t.Run("missing database is invalid", func(t *testing.T) {
		_, err := f.m.Materialize(ctx, desired("postgres", fields(port, "nodb"), `{}`, true, canary))
		assertClass(t, err, reconcile.ClassInvalid, `refused by server: database "nodb" does not exist (3D000)`)
	})
	t.Run("wrong port is transient", func(t *testing.T) {
		_, err := f.m.Materialize(ctx, desired("postgres", fields(freePort(t), "dsdb"), `{}`, true, canary))
		assertClass(t, err, reconcile.ClassTransient, "connect: …")
	})
	t.Run("apply timeout is transient", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := f.m.Materialize(ctx, desired("postgres", fields(port, "dsdb"), `{}`, true, canary))
		assertClass(t, err, reconcile.ClassTransient, "connect: context canceled")
	})
	t.Run("pool settings honoured", func(t *testing.T) {
		pool := `{"maxConns":7,"minConns":2,"maxConnLifetime":"30m","maxConnIdleTime":"5m","healthCheckPeriod":"45s"}`
		inst, err := f.m.Materialize(ctx, desired("postgres", fields(port, "dsdb"), pool, true, canary))
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		cfg := inst.(*datasource.Pool).PG().Config()
		if cfg.MaxConns != 7 || cfg.MinConns != 2 || cfg.MaxConnLifetime != 30*time.Minute ||
			cfg.MaxConnIdleTime != 5*time.Minute || cfg.HealthCheckPeriod != 45*time.Second {
			t.Fatalf("pool config = max %d min %d life %v idle %v health %v", cfg.MaxConns, cfg.MinConns,
				cfg.MaxConnLifetime, cfg.MaxConnIdleTime, cfg.HealthCheckPeriod)
		}
	})
	t.Run("stopped server is transient", func(t *testing.T) {
		f.cluster.Stop()
		defer f.cluster.Start()
		_, err := f.m.Materialize(ctx, desired("postgres", fields(port, "dsdb"), `{}`, true, canary))
		assertClass(t, err, reconcile.ClassTransient, "connect: …")
	})
	if strings.Contains(f.logs.String(), canary) {
		t.Fatalf("debug logs leak the password:\n%s", f.logs)
	}
	if !strings.Contains(f.logs.String(), "opening postgres pool") {
		t.Fatalf("expected debug logs, got:\n%s", f.logs)
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := datasource.New(datasource.Options{})
	ctx := context.Background()
	path := filepath.Join(dir, "crm.db")
	cfg := fmt.Sprintf(`{"path":%q}`, path)

	inst, err := m.Materialize(ctx, desired("sqlite", cfg, `{"maxConns":3,"minConns":1,"maxConnLifetime":"1h","maxConnIdleTime":"1m"}`, true, canary))
	if err != nil {
		t.Fatal(err)
	}
	db := inst.(*datasource.Pool).SQL()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if got := db.Stats().MaxOpenConnections; got != 3 {
		t.Fatalf("MaxOpenConnections = %d, want 3", got)
	}
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("db usable after Close")
	}

	// Reopen through the Body form only (no row): the data is there.
	d := desired("sqlite", cfg, `{}`, true, "")
	d.Datasource = nil
	inst, err = m.Materialize(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	var x int
	if err := inst.(*datasource.Pool).SQL().QueryRowContext(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Fatalf("x = %d, %v", x, err)
	}
	inst.Close()

	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not a database "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = m.Materialize(ctx, desired("sqlite", fmt.Sprintf(`{"path":%q}`, junk), `{}`, true, ""))
	assertClass(t, err, reconcile.ClassInvalid, junk+" is not a SQLite database")

	_, err = m.Materialize(ctx, desired("sqlite", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "no", "such", "dir.db")), `{}`, true, ""))
	assertClass(t, err, reconcile.ClassTransient, "open "+filepath.Join(dir, "no", "such", "dir.db")+": …")

	d = desired("sqlite", cfg, `{}`, false, "")
	d.Datasource = nil
	_, err = m.Materialize(ctx, d)
	assertClass(t, err, reconcile.ClassInvalid, "datasource inactive")
}

func freePort(t *testing.T) int {
	t.Helper()
	// A port no one listens on: bind, note, release.
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return portOf(l)
}
