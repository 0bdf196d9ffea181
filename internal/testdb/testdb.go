package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding the admin URL of the test server.
const EnvURL = "RECONCILER_TEST_DATABASE_URL"

const howTo = "no PostgreSQL for tests: run `make test` (it starts a private throwaway cluster), " +
	"or set " + EnvURL + "=postgres://user@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL returns the server's admin URL or fails the test saying how to get one.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Fatal(howTo)
	}
	return u
}

// New creates an empty database for this test and returns its URL. The
// database is dropped when the test ends.
func New(t testing.TB) string {
	t.Helper()
	return NewFromTemplate(t, "")
}

// NewFromTemplate creates a database copied from template ("" for the
// default) and returns its URL; it is dropped when the test ends.
func NewFromTemplate(t testing.TB, template string) string {
	t.Helper()
	admin := AdminURL(t)
	name := "rt_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Exec(ctx, admin, createSQL(name, template)); err != nil {
		t.Fatalf("create test database %s: %v (%s)", name, err, howTo)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = Exec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return WithDatabase(admin, name)
}

var templateMu sync.Mutex

// Template makes sure a template database called name exists, built once
// per server by setup (called with its URL), and returns the name. Use it
// with NewFromTemplate so that each test gets a migrated database fast.
// Templates persist on the server; name them after their schema version.
func Template(t testing.TB, name string, setup func(ctx context.Context, url string) error) string {
	t.Helper()
	templateMu.Lock()
	defer templateMu.Unlock()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test server: %v (%s)", err, howTo)
	}
	defer conn.Close(ctx)
	// Serialize template creation across test processes.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7741001)"); err != nil {
		t.Fatalf("lock template: %v", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7741001)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatalf("look up template %s: %v", name, err)
	}
	if exists {
		return name
	}
	tmp := name + "_build_" + randomHex(3)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{tmp}.Sanitize()); err != nil {
		t.Fatalf("create template %s: %v", tmp, err)
	}
	if err := setup(ctx, WithDatabase(admin, tmp)); err != nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{tmp}.Sanitize()+" WITH (FORCE)")
		t.Fatalf("set up template %s: %v", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{tmp}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("rename template %s: %v", name, err)
	}
	return name
}

func createSQL(name, template string) string {
	s := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		s += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	return s
}

// Exec runs one statement on the database at url.
func Exec(ctx context.Context, dbURL, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// WithDatabase returns u with its database replaced by name.
func WithDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		panic(fmt.Sprintf("testdb: bad url: %v", err))
	}
	p.Path = "/" + name
	return p.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
