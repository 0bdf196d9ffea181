package datasource_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// silentServer accepts TCP connections and never says anything. It
// counts the connections it accepted.
type silentServer struct {
	port     int
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
}

func startSilentServer(t *testing.T) *silentServer {
	t.Helper()
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{port: portOf(l)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		s.hangUp()
	})
	return s
}

// hangUp closes the accepted connections (the server's side).
func (s *silentServer) hangUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// TestPoolCapsAgainstASilentServer: one row asking for thousands of
// connections to a server that never answers is held by the cap before any
// socket opens; a row within the cap costs one socket, returns within the
// connect timeout, and leaves no descriptor open.
func TestPoolCapsAgainstASilentServer(t *testing.T) {
	srv := startSilentServer(t)
	const timeout = time.Second
	m := datasource.New(datasource.Options{ConnectTimeout: timeout})
	config := fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"database":"d","username":"u","sslmode":"disable"}`, srv.port)
	baseline := openFDs(t)

	materialize := func(pool string) (registry.Instance, error) {
		type result struct {
			inst registry.Instance
			err  error
		}
		done := make(chan result, 1)
		go func() {
			inst, err := m.Materialize(context.Background(), desired(record("postgres", config, pool, true), canary))
			done <- result{inst, err}
		}()
		// A liveness bound, far above the connect timeout.
		select {
		case r := <-done:
			return r.inst, r.err
		case <-time.After(60 * time.Second):
			t.Fatalf("Materialize(%s) did not return: the connect timeout does not bound it", pool)
			return nil, nil
		}
	}

	inst, err := materialize(`{"maxConns":3000,"minConns":3000}`)
	assertClass(t, inst, err, reconcile.ClassInvalid, "pool.maxConns (3000) exceeds the cap of 50 connections per datasource (datasource.max_conns)")
	inst, err = materialize(`{"max":50,"min":3000}`)
	assertClass(t, inst, err, reconcile.ClassInvalid, "pool.min (3000) exceeds the cap of 50 connections per datasource (datasource.max_conns)")
	if n := srv.accepted.Load(); n != 0 {
		t.Fatalf("a capped row opened %d connections", n)
	}
	if n := openFDs(t); n > baseline {
		t.Fatalf("a capped row left %d descriptors open", n-baseline)
	}

	inst, err = materialize(`{"maxConns":50,"minConns":50}`)
	assertClass(t, inst, err, reconcile.ClassTransient, fmt.Sprintf("datasource crm: connect 127.0.0.1:%d: …", srv.port))
	if n := srv.accepted.Load(); n < 1 || n > 2 {
		t.Fatalf("a row within the cap opened %d connections, want 1 (2 with a fallback)", n)
	}
	srv.hangUp()
	var fds int
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "descriptors back to the baseline", func() bool {
		fds = openFDs(t)
		return fds <= baseline
	})
	t.Logf("fds: baseline %d, after %d; connections accepted by the silent server: %d", baseline, fds, srv.accepted.Load())
}
