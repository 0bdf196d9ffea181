package datasource_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/metadata"
)

// FuzzParseRecord: every fault wraps metadata.ErrInvalid; an accepted record respects
// the caps, carries no password and names no SQLite driver parameter.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		record("postgres", `{"url":"postgres://u@h:5432/db?sslmode=disable"}`, `{}`, true),
		record("postgres", `{"host":"::1","port":"5432","database":"d","username":"u","sslmode":"require"}`, `{"maxConns":4,"minConns":1,"maxConnLifetime":"30m"}`, true),
		record("postgres", `{"url":"postgres://u:pw@h/db?pool_max_conns=9999"}`, `{"min":-1}`, true),
		record("postgres", `{"host":"h","ssl":true,"schema":"s","statementTimeout":5}`, `{"min":0,"max":10,"idleTimeoutMillis":30000,"connectionTimeoutMillis":3000}`, false),
		record("sqlite", `{"path":"/tmp/x.db"}`, `{"maxConnIdleTime":"1m"}`, true),
		record("sqlite", `{"filename":"file:x.db?_pragma=user_version(1)"}`, ``, true),
		`{"driver":"sqlite","config":null,"pool":[]}`,
		record("mcp", `{}`, `{}`, true),
		record("postgres", `{"host":"h","port":1e9}`, `{"maxConns":1.5}`, true),
		`[]`, `null`, `{"driver":"postgres","config":{"host":"h"},"pool":{"minConns":3000,"maxConns":3000}}`,
	} {
		f.Add([]byte(s))
	}
	lim := datasource.Limits{MaxConns: 50, DefaultMaxConns: 10}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := datasource.ParseRecord(body, lim)
		if err != nil {
			if !errors.Is(err, metadata.ErrInvalid) {
				t.Fatalf("fault %v does not wrap ErrInvalid", err)
			}
			return
		}
		p := r.Pool
		if p.MaxConns < 1 || p.MaxConns > lim.MaxConns || p.MinConns < 0 || p.MinConns > p.MaxConns {
			t.Fatalf("accepted pool outside the caps: %+v", p)
		}
		switch r.Driver {
		case datasource.DriverPostgres:
			cfg, err := pgxParse(r.Postgres.ConnString)
			if err != nil {
				return // held as a config fault when materialized
			}
			if cfg.Password != "" && os.Getenv("PGPASSWORD") == "" {
				t.Fatalf("accepted a connection string with a password: %q", r.Postgres.ConnString)
			}
			for k := range cfg.RuntimeParams {
				if strings.HasPrefix(k, "pool_") {
					t.Fatalf("accepted a connection string with %s: %q", k, r.Postgres.ConnString)
				}
			}
		case datasource.DriverSQLite:
			if r.SQLitePath == "" || strings.ContainsAny(r.SQLitePath, "?#") || strings.HasPrefix(strings.ToLower(r.SQLitePath), "file:") {
				t.Fatalf("accepted sqlite path %q", r.SQLitePath)
			}
		default:
			t.Fatalf("accepted driver %q", r.Driver)
		}
	})
}
