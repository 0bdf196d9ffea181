package datasource

import (
	"errors"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/internal/jsonobj"
)

func FuzzParseConfig(f *testing.F) {
	for _, s := range [][3]string{
		{"postgres", `{"url":"postgres://u@h:5432/db?sslmode=disable"}`, `{}`},
		{"postgres", `{"host":"::1","port":5432,"database":"d","user":"u","sslmode":"require"}`, `{"maxConns":4,"minConns":1,"maxConnLifetime":"30m"}`},
		{"postgres", `{"url":"postgres://u:pw@h/db"}`, `{"minConns":-1}`},
		{"sqlite", `{"path":"/tmp/x.db"}`, `{"maxConnIdleTime":"1m"}`},
		{"sqlite", `null`, `[]`},
		{"mcp", `{}`, `{}`},
		{"postgres", `{"host":"h","port":1e9}`, `{"maxConns":1.5}`},
	} {
		f.Add(s[0], []byte(s[1]), []byte(s[2]))
	}
	f.Fuzz(func(t *testing.T, driver string, config, pool []byte) {
		c, err := parseConfig(driver, config, pool)
		if err != nil {
			if !errors.Is(err, jsonobj.ErrBody) {
				t.Fatalf("fault %v does not wrap ErrBody", err)
			}
			return
		}
		if c.Pool.MaxConns > 0 && c.Pool.MinConns > c.Pool.MaxConns {
			t.Fatalf("accepted min > max: %+v", c.Pool)
		}
		if driver == DriverPostgres && c.ConnString == "" || driver == DriverSQLite && c.Path == "" {
			t.Fatalf("accepted without a target: %+v", c)
		}
	})
}
