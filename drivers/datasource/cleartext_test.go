package datasource_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// cleartextServer is a hostile PostgreSQL server: it declines TLS, asks
// every client for its password in cleartext (AuthenticationCleartextPassword)
// and records any password message it receives.
type cleartextServer struct {
	port      int
	passwords atomic.Int64
	got       atomic.Value // string: the last password received
}

func startCleartextServer(t *testing.T) *cleartextServer {
	t.Helper()
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	s := &cleartextServer{port: portOf(l)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return s
}

func (s *cleartextServer) serve(c net.Conn) {
	defer c.Close()
	for {
		var hdr [8]byte // startup packet: length, code
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n, code := binary.BigEndian.Uint32(hdr[:4]), binary.BigEndian.Uint32(hdr[4:])
		if code == 80877103 || code == 80877104 { // SSLRequest, GSSENCRequest
			if _, err := c.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		if _, err := io.CopyN(io.Discard, c, int64(n)-8); err != nil {
			return
		}
		break
	}
	// AuthenticationCleartextPassword, then read the answer.
	if _, err := c.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 3}); err != nil {
		return
	}
	var mh [5]byte
	if _, err := io.ReadFull(c, mh[:]); err != nil || mh[0] != 'p' {
		return
	}
	body := make([]byte, binary.BigEndian.Uint32(mh[1:])-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return
	}
	s.passwords.Add(1)
	s.got.Store(strings.TrimRight(string(body), "\x00"))
}

// TestCleartextPasswordRefused: a server that declines TLS and asks for the
// password in cleartext never receives it, whatever the row's sslmode
// (prefer, the default, falls back to plaintext); the entry is held
// (refused), naming the rule.
func TestCleartextPasswordRefused(t *testing.T) {
	t.Parallel()
	srv := startCleartextServer(t)
	m := datasource.New(datasource.Options{})
	for _, ssl := range []string{``, `,"sslmode":"prefer"`, `,"sslmode":"disable"`, `,"sslmode":"allow"`} {
		config := fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"database":"d","username":"u"%s}`, srv.port, ssl)
		inst, err := m.Materialize(context.Background(), desired(record("postgres", config, "", true), canary))
		assertClass(t, inst, err, reconcile.ClassRefused, fmt.Sprintf("datasource crm: server 127.0.0.1:%d: the server asked for the password in cleartext over an unencrypted connection: refused (use TLS, sslmode=require, or scram-sha-256)", srv.port))
	}
	if n := srv.passwords.Load(); n != 0 {
		t.Fatalf("the hostile server received %d password messages", n)
	}
}

// TestLocalTargetsRefused: a Unix socket directory as host, a URL without
// a host (pgx would use its default socket and the daemon's OS user) and a
// socket in the URL's host parameter are held naming datasource.allow_local
// before any connection; TCP hosts, loopback included, are not.
func TestLocalTargetsRefused(t *testing.T) {
	t.Parallel()
	srv := startCleartextServer(t)
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
	config := fmt.Sprintf(`{"host":"localhost","port":%d,"database":"d","username":"u"}`, srv.port)
	_, err := m.Materialize(context.Background(), desired(record("postgres", config, "", true), canary))
	if _, reason := reconcile.Classify(err); !strings.Contains(reason, "in cleartext") {
		t.Errorf("loopback TCP host: %q, want it reached", reason)
	}
}
