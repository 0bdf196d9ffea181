package datasource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/internal/pgfake"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// TestCleartextPasswordRefused: a server that declines TLS and asks for the
// password in cleartext never receives it, whatever the row's sslmode
// (prefer, the default, falls back to plaintext); the entry is held
// (refused), naming the rule.
func TestCleartextPasswordRefused(t *testing.T) {
	t.Parallel()
	srv := pgfake.StartCleartext(t)
	m := datasource.New(datasource.Options{})
	for _, ssl := range []string{``, `,"sslmode":"prefer"`, `,"sslmode":"disable"`, `,"sslmode":"allow"`} {
		config := fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"database":"d","username":"u"%s}`, srv.Port(), ssl)
		inst, err := m.Materialize(context.Background(), desired(record("postgres", config, "", true), canary))
		assertClass(t, inst, err, reconcile.ClassRefused, fmt.Sprintf("datasource crm: server 127.0.0.1:%d: the server asked for the password in cleartext over an unencrypted connection: refused (use TLS, sslmode=require, or scram-sha-256)", srv.Port()))
	}
	if n := srv.Passwords(); n != 0 {
		t.Fatalf("the hostile server received %d password messages", n)
	}
}

// TestLocalTargetsRefused: a Unix socket directory as host, a URL without
// a host (pgx would use its default socket and the daemon's OS user) and a
// socket in the URL's host parameter are held naming datasource.allow_local
// before any connection; TCP hosts, loopback included, are not.
func TestLocalTargetsRefused(t *testing.T) {
	t.Parallel()
	srv := pgfake.StartCleartext(t)
	m := datasource.New(datasource.Options{})
	for _, config := range []string{
		`{"host":"/var/run/postgresql","database":"postgres","username":"postgres"}`,
		`{"url":"postgres:///postgres"}`,
		`{"url":"postgresql://@/postgres?user=root"}`,
		`{"url":"postgres:///postgres?host=/tmp"}`,
		`{"url":"postgres://u@127.0.0.1:1/d?host=/tmp"}`,
	} {
		inst, err := m.Materialize(context.Background(), desired(record("postgres", config, "", true), canary))
		c, reason := reconcile.Classify(err)
		if inst != nil || c != reconcile.ClassInvalid || !strings.Contains(reason, "local connections need datasource.allow_local") {
			t.Errorf("%s: %v %q, want held naming datasource.allow_local", config, c, reason)
		}
	}
	// A TCP host is a TCP host: here the hostile server (refused for its
	// cleartext request, which shows it was reached).
	config := fmt.Sprintf(`{"host":"localhost","port":%d,"database":"d","username":"u"}`, srv.Port())
	_, err := m.Materialize(context.Background(), desired(record("postgres", config, "", true), canary))
	if _, reason := reconcile.Classify(err); !strings.Contains(reason, "in cleartext") {
		t.Errorf("loopback TCP host: %q, want it reached", reason)
	}
}
