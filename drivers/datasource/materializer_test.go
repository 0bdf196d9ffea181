package datasource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const canary = "canary-pw-9d41e7"

// record is a datasource record as the platform stores it.
func record(driver, config, pool string, active bool) string {
	r := map[string]any{"name": "crm", "label": "CRM", "driver": driver, "schemaMode": "managed",
		"config": json.RawMessage(config), "active": active, "origin": "runtime",
		"external": map[string]any{"credentialsRef": "sys_secret:sec_0a1b", "allowWrites": true}}
	if pool != "" {
		r["pool"] = json.RawMessage(pool)
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// desired is the loop's Desired for a record body and a resolved password.
func desired(body, value string) reconcile.Desired {
	return reconcile.Desired{Kind: registry.KindDatasource, Key: "crm", Revision: 5, Body: json.RawMessage(body),
		CredentialRef: "sys_secret:sec_0a1b", Secret: secret.New(value)}
}

func debugLogger() (*slog.Logger, *proctest.Buffer) {
	buf := proctest.NewBuffer()
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// assertClass checks a failure's class and reason (a trailing "…" matches
// a prefix), that the instance is a nil interface, and that the password
// shows nowhere in the error.
func assertClass(t *testing.T, inst registry.Instance, err error, class reconcile.Class, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Materialize succeeded, want %v %q", class, reason)
	}
	if inst != nil {
		t.Fatalf("failed Materialize returned a non-nil instance %#v", inst)
	}
	c, r := reconcile.Classify(err)
	ok := r == reason
	if p, cut := strings.CutSuffix(reason, "…"); cut {
		ok = strings.HasPrefix(r, p)
	}
	if c != class || !ok {
		t.Fatalf("got %v %q, want %v %q", c, r, class, reason)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), canary) {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestInvalidRecord(t *testing.T) {
	t.Parallel()
	pg := func(config, pool string) string { return record("postgres", config, pool, true) }
	tests := []struct {
		name, body, reason string
	}{
		{"not an object", `"crm"`, "datasource record must be a JSON object"},
		{"not JSON", `{"driver":`, "datasource record is not valid JSON: …"},
		{"no driver", `{"name":"crm","config":{}}`, "driver is required"},
		{"driver not string", `{"driver":5}`, "driver must be a string"},
		{"unknown driver", record("mysql", `{}`, "", true), `unknown driver "mysql" (want postgres or sqlite)`},
		{"plugin driver", record("com.vendor.snowflake", `{}`, "", true), `unknown driver "com.vendor.snowflake" (want postgres or sqlite)`},
		{"active not bool", `{"driver":"postgres","active":"yes"}`, "active must be true or false"},
		{"inactive", record("postgres", `{"host":"h"}`, "", false), "datasource inactive"},
		{"config not object", pg(`[]`, ""), "config must be a JSON object"},
		{"missing host", pg(`{"database":"d"}`, ""), "config.host is required"},
		{"port not numeric", pg(`{"host":"h","port":"54x"}`, ""), "config.port must be an integer between 1 and 65535"},
		{"port bool", pg(`{"host":"h","port":true}`, ""), "config.port must be an integer"},
		{"port range", pg(`{"host":"h","port":70000}`, ""), "config.port must be between 1 and 65535"},
		{"port string range", pg(`{"host":"h","port":"0"}`, ""), "config.port must be an integer between 1 and 65535"},
		{"bad sslmode", pg(`{"host":"h","sslmode":"maybe"}`, ""), `config.sslmode "maybe" is not one of disable, allow, prefer, require, verify-ca, verify-full`},
		{"sslmode and ssl", pg(`{"host":"h","sslmode":"require","ssl":true}`, ""), "config.sslmode and config.ssl are exclusive"},
		{"user and username", pg(`{"host":"h","user":"a","username":"b"}`, ""), "config.username and config.user are exclusive"},
		{"inline password", pg(`{"host":"h","password":"`+canary+`"}`, ""), "config.password must not be set; use external.credentialsRef"},
		{"unknown config key", pg(`{"host":"h","hostname":"x"}`, ""), "config.hostname is not a known setting"},
		{"url with password", pg(`{"url":"postgres://u:`+canary+`@h/db"}`, ""), "config.url must not carry a password; use external.credentialsRef"},
		{"url password param", pg(`{"url":"postgres://u@h/db?password=`+canary+`"}`, ""), "config.url must not carry a password; use external.credentialsRef"},
		{"url password param case", pg(`{"url":"postgres://u@h/db?PassWord=`+canary+`"}`, ""), "config.url must not carry a password; use external.credentialsRef"},
		{"url sslpassword", pg(`{"url":"postgres://u@h/db?sslpassword=`+canary+`"}`, ""), "config.url must not carry a password; use external.credentialsRef"},
		{"url sslrootcert", pg(`{"url":"postgres://u@h/db?sslrootcert=/etc/shadow"}`, ""), "config.url must not carry sslrootcert (a file on the reconciler's host)"},
		{"url passfile", pg(`{"url":"postgres://u@h/db?passfile=/root/.pgpass"}`, ""), "config.url must not carry passfile (a file on the reconciler's host)"},
		{"url servicefile", pg(`{"url":"postgres://u@h/db?servicefile=/x"}`, ""), "config.url must not carry servicefile (a file on the reconciler's host)"},
		{"url pool bypass", pg(`{"url":"postgres://u@h/db?pool_min_conns=3000"}`, ""), "config.url must not carry pool_min_conns; use pool.minConns"},
		{"url and host", pg(`{"url":"postgres://u@h/db","host":"h"}`, ""), "config.url and config.host are exclusive"},
		{"url and username", pg(`{"url":"postgres://u@h/db","username":"u"}`, ""), "config.url and config.username are exclusive"},
		{"url scheme", pg(`{"url":"mysql://u@h/db"}`, ""), "config.url must be a postgres:// URL"},
		{"url opaque", pg(`{"url":"postgres:h/db"}`, ""), "config.url must be a postgres:// URL"},
		{"pool not object", pg(`{"host":"h"}`, `7`), "pool must be a JSON object"},
		{"pool unknown key", pg(`{"host":"h"}`, `{"size":3}`), "pool.size is not a known setting"},
		{"pool min over max", pg(`{"host":"h"}`, `{"maxConns":2,"minConns":3}`), "pool.minConns (3) must not exceed pool.maxConns (2)"},
		{"platform min over max", pg(`{"host":"h"}`, `{"max":2,"min":3}`), "pool.min (3) must not exceed pool.max (2)"},
		{"pool min over default", pg(`{"host":"h"}`, `{"minConns":20}`), "pool.minConns (20) exceeds the default pool size (10); set pool.maxConns"},
		{"pool max over cap", pg(`{"host":"h"}`, `{"maxConns":3000}`), "pool.maxConns (3000) exceeds the cap of 50 connections per datasource (datasource.max_conns)"},
		{"pool min over cap", pg(`{"host":"h"}`, `{"maxConns":50,"minConns":3000}`), "pool.minConns (3000) exceeds the cap of 50 connections per datasource (datasource.max_conns)"},
		{"platform max over cap", pg(`{"host":"h"}`, `{"max":10000}`), "pool.max (10000) exceeds the cap of 50 connections per datasource (datasource.max_conns)"},
		{"pool huge", pg(`{"host":"h"}`, `{"maxConns":1e12}`), "pool.maxConns must be an integer"},
		{"pool both spellings", pg(`{"host":"h"}`, `{"max":3,"maxConns":3}`), "pool.maxConns and pool.max are exclusive"},
		{"pool zero max", pg(`{"host":"h"}`, `{"maxConns":0}`), "pool.maxConns must be between 1 and 2147483647"},
		{"pool negative min", pg(`{"host":"h"}`, `{"min":-1}`), "pool.min must be between 0 and 2147483647"},
		{"pool bad duration", pg(`{"host":"h"}`, `{"maxConnLifetime":"forever"}`), `pool.maxConnLifetime must be a positive duration like "5s"`},
		{"pool duration number", pg(`{"host":"h"}`, `{"maxConnIdleTime":30}`), `pool.maxConnIdleTime must be a duration like "5s"`},
		{"pool millis string", pg(`{"host":"h"}`, `{"idleTimeoutMillis":"30s"}`), "pool.idleTimeoutMillis must be an integer"},
		{"pool idle both", pg(`{"host":"h"}`, `{"idleTimeoutMillis":1000,"maxConnIdleTime":"1s"}`), "pool.maxConnIdleTime and pool.idleTimeoutMillis are exclusive"},
		{"sqlite missing path", record("sqlite", `{}`, "", true), "config.path is required"},
		{"sqlite empty path", record("sqlite", `{"path":""}`, "", true), "config.path must not be empty"},
		{"sqlite unknown key", record("sqlite", `{"path":"x","url":"y"}`, "", true), "config.url is not a known setting"},
		{"sqlite both keys", record("sqlite", `{"path":"x","filename":"y"}`, "", true), "config.path and config.filename are exclusive"},
		{"sqlite file uri", record("sqlite", `{"path":"file:/tmp/x.db?_pragma=journal_mode(delete)"}`, "", true), "config.path must be a plain file path, not a file: URI"},
		{"sqlite FILE uri", record("sqlite", `{"filename":"FILE:x.db"}`, "", true), "config.filename must be a plain file path, not a file: URI"},
		{"sqlite query", record("sqlite", `{"path":"x.db?_pragma=user_version(7)"}`, "", true), "config.path must be a plain file path without ? or # (no driver parameters)"},
		{"sqlite dotdot", record("sqlite", `{"path":"a/../../etc/passwd"}`, "", true), "config.path must not contain a .. element"},
		{"sqlite memory", record("sqlite", `{"filename":":memory:"}`, "", true), `config.filename ":memory:" is not supported: an in-memory database would be private to the reconciler`},
	}
	m := datasource.New(datasource.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, err := m.Materialize(context.Background(), desired(tt.body, canary))
			assertClass(t, inst, err, reconcile.ClassInvalid, tt.reason)
		})
	}
}

// TestParseRecordShapes reads the platform's spellings and this project's,
// and checks the connection each builds through pgx's own parser.
func TestParseRecordShapes(t *testing.T) {
	t.Parallel()
	lim := datasource.Limits{MaxConns: 50, DefaultMaxConns: 10}
	tests := []struct {
		name, config, pool string
		host               string
		port               uint16
		db, user, sslmode  string
		max, min           int32
		idle, connect      time.Duration
		params             map[string]string
	}{
		{name: "platform fields", config: `{"host":"db.internal","port":5433,"database":"crm","username":"crm_app"}`,
			pool: `{"min":2,"max":8,"idleTimeoutMillis":30000,"connectionTimeoutMillis":3000}`,
			host: "db.internal", port: 5433, db: "crm", user: "crm_app", max: 8, min: 2, idle: 30 * time.Second, connect: 3 * time.Second},
		{name: "user and port string", config: `{"host":"::1","port":"6543","database":"d b","user":"o'neil","sslmode":"require"}`,
			host: "::1", port: 6543, db: "d b", user: "o'neil", sslmode: "require", max: 10},
		{name: "ssl toggle and session settings", config: `{"host":"h","ssl":false,"schema":"sales","applicationName":"reconciler","statementTimeout":5000}`,
			host: "h", sslmode: "disable", max: 10, params: map[string]string{"search_path": "sales", "application_name": "reconciler", "statement_timeout": "5000"}},
		{name: "url", config: `{"url":"postgresql://u@h:7000/db?sslmode=verify-full&application_name=x"}`, pool: `{"maxConns":50,"minConns":50}`,
			host: "h", port: 7000, db: "db", user: "u", sslmode: "verify-full", max: 50, min: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := record("postgres", tt.config, tt.pool, true)
			rec, err := datasource.ParseRecord([]byte(body), lim)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Name != "crm" || rec.Driver != "postgres" || !rec.Active {
				t.Fatalf("record = %+v", rec)
			}
			if rec.Pool.MaxConns != tt.max || rec.Pool.MinConns != tt.min || rec.Pool.MaxConnIdleTime != tt.idle || rec.Pool.ConnectTimeout != tt.connect {
				t.Fatalf("pool = %+v", rec.Pool)
			}
			for k, v := range tt.params {
				if rec.Postgres.RuntimeParams[k] != v {
					t.Fatalf("runtime params = %v, want %s=%s", rec.Postgres.RuntimeParams, k, v)
				}
			}
			cfg, err := pgxParse(rec.Postgres.ConnString)
			if err != nil {
				t.Fatalf("pgx cannot parse %q: %v", rec.Postgres.ConnString, err)
			}
			if cfg.Host != tt.host || (tt.port != 0 && cfg.Port != tt.port) || (tt.db != "" && cfg.Database != tt.db) ||
				(tt.user != "" && cfg.User != tt.user) || cfg.Password != "" {
				t.Fatalf("parsed %q: host %q port %d db %q user %q", rec.Postgres.ConnString, cfg.Host, cfg.Port, cfg.Database, cfg.User)
			}
			if tt.sslmode == "disable" && cfg.TLSConfig != nil || tt.sslmode == "require" && (cfg.TLSConfig == nil || len(cfg.Fallbacks) > 0) {
				t.Fatalf("sslmode %s: tls %v fallbacks %d", tt.sslmode, cfg.TLSConfig != nil, len(cfg.Fallbacks))
			}
		})
	}
	rec, err := datasource.ParseRecord([]byte(record("sqlite", `{"filename":"crm.db"}`, "", true)), lim)
	if err != nil || rec.SQLitePath != "crm.db" || rec.Pool.MaxConns != 10 {
		t.Fatalf("sqlite filename: %+v %v", rec, err)
	}
	// Members the reconciler does not use are ignored.
	rec, err = datasource.ParseRecord([]byte(`{"driver":"pg","config":{"host":"h"},"ssl":{"enabled":true},"autoConnect":true,"_packageId":"p","description":"x"}`), lim)
	if err != nil || rec.Driver != "postgres" || !rec.Active || rec.Name != "" {
		t.Fatalf("extra members: %+v %v", rec, err)
	}
}

// TestFailuresReturnNilInterface: whatever a failed Materialize returns can
// be closed by a caller that abandons it, and is a nil interface.
func TestFailuresReturnNilInterface(t *testing.T) {
	t.Parallel()
	m := datasource.New(datasource.Options{SQLiteDir: t.TempDir(), ConnectTimeout: 2 * time.Second})
	for _, body := range []string{
		record("postgres", fields(proctest.FreePort(t), "dsdb"), "", true), // nothing listens
		record("sqlite", `{"path":"missing.db"}`, "", true),
		record("mysql", `{}`, "", true),
	} {
		inst, err := m.Materialize(context.Background(), desired(body, canary))
		if err == nil {
			t.Fatalf("Materialize(%s) succeeded", body)
		}
		if inst != nil {
			t.Fatalf("Materialize(%s) returned %#v with %v", body, inst, err)
		}
		// The abandon path closes whatever came back.
		if inst != nil {
			_ = inst.Close()
		}
	}
	var p *datasource.Pool
	if err := p.Close(); err != nil {
		t.Fatalf("nil *Pool Close: %v", err)
	}
}
