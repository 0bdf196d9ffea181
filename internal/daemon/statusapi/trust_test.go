package statusapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
)

// serve runs h on a loopback listener for the test.
func serve(t *testing.T, h http.Handler) *Server {
	t.Helper()
	srv, err := Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return srv
}

// send sends one request over a fresh connection and returns its status.
func send(t *testing.T, srv *Server, method, path, host string, header http.Header) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+srv.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A page of another site whose name was rebound to 127.0.0.1 sends its
// own name as Host: refused, and nothing is triggered.
func TestDNSRebindingRefused(t *testing.T) {
	b := newFake()
	srv := serve(t, NewHandler(Options{Backend: b}))
	_, port, _ := net.SplitHostPort(srv.Addr())
	json := http.Header{"Content-Type": {"application/json"}}
	for _, host := range []string{"evil.test", "evil.test:" + port, "127.0.0.1.evil.test", "localhost.evil.test:" + port, "0x7f000001.test"} {
		if code := send(t, srv, "GET", "/v1/status", host, nil); code != http.StatusMisdirectedRequest {
			t.Errorf("GET with Host %q: %d, want 421", host, code)
		}
		if code := send(t, srv, "POST", "/v1/resync", host, json); code != http.StatusMisdirectedRequest {
			t.Errorf("POST with Host %q: %d, want 421", host, code)
		}
	}
	if n := b.resyncs.Load(); n != 0 {
		t.Fatalf("%d resyncs from rebound pages", n)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "localhost.", "127.0.0.1", "[::1]:" + port} {
		if code := send(t, srv, "GET", "/v1/status", host, nil); code != 200 {
			t.Errorf("Host %q: %d, want 200", host, code)
		}
	}
}

// The configured listen name is a valid Host too.
func TestListenNameIsAValidHost(t *testing.T) {
	srv, err := Listen("localhost:0", NewHandler(Options{Backend: newFake()}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if code := send(t, srv, "GET", "/v1/status", "localhost", nil); code != 200 {
		t.Fatalf("%d", code)
	}
}

// A cross-site form or fetch can POST text/plain without a preflight: the
// mutating endpoints refuse anything but JSON.
func TestCrossSitePostRefused(t *testing.T) {
	b := newFake()
	wrote := atomic.Int32{}
	srv := serve(t, NewHandler(Options{Backend: b, WriteDrift: func(context.Context) (reconcile.DriftReport, error) {
		wrote.Add(1)
		return reconcile.DriftReport{}, nil
	}}))
	for _, path := range []string{"/v1/reconcile", "/v1/resync", "/v1/drift"} {
		for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "application/json-patch+json"} {
			h := http.Header{}
			if ct != "" {
				h.Set("Content-Type", ct)
			}
			if code := send(t, srv, "POST", path, "127.0.0.1", h); code != http.StatusUnsupportedMediaType {
				t.Errorf("POST %s as %q: %d, want 415", path, ct, code)
			}
		}
	}
	if b.triggers.Load()+b.resyncs.Load()+wrote.Load() != 0 {
		t.Fatalf("triggered %d %d %d", b.triggers.Load(), b.resyncs.Load(), wrote.Load())
	}
	for _, ct := range []string{"application/json", "Application/JSON; charset=utf-8"} {
		if code := send(t, srv, "POST", "/v1/resync", "127.0.0.1", http.Header{"Content-Type": {ct}}); code != 202 {
			t.Errorf("POST as %q: %d", ct, code)
		}
	}
	if b.resyncs.Load() != 2 {
		t.Fatalf("resyncs %d", b.resyncs.Load())
	}
}

// Listen refuses a non-loopback address without a token, and the handler
// refuses a request that arrived on one.
func TestNoTokenOffLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		srv, err := Listen(addr, NewHandler(Options{Backend: newFake()}))
		if !errors.Is(err, ErrNoToken) {
			if srv != nil {
				srv.Close()
			}
			t.Errorf("Listen(%s) without a token: %v", addr, err)
		}
		if _, err := Listen(addr, http.NotFoundHandler()); !errors.Is(err, ErrNoToken) {
			t.Errorf("Listen(%s) with a plain handler: %v", addr, err)
		}
	}
	srv, err := Listen("0.0.0.0:0", NewHandler(Options{Backend: newFake(), Token: "t"}))
	if err != nil {
		t.Fatalf("Listen with a token: %v", err)
	}
	srv.Close()

	h := NewHandler(Options{Backend: newFake()})
	r := httptest.NewRequest("GET", "/v1/status", nil)
	r.Host = "10.0.0.7:9477"
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 9477}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "loopback only") {
		t.Fatalf("request on a public address without a token: %d %s", w.Code, w.Body)
	}
	// With a token, the address the connection came in on is a valid Host.
	h = NewHandler(Options{Backend: newFake(), Token: "t"})
	r.Header.Set("Authorization", "Bearer t")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("request on a public address with the token: %d %s", w.Code, w.Body)
	}
	// With a token, a Kubernetes Service name is a valid Host (the token is
	// the boundary); without the token it still gets 401, never the data.
	r.Host = "reconciler.crm.svc.cluster.local:9477"
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("Service name as Host with the token: %d %s", w.Code, w.Body)
	}
	r.Header.Del("Authorization")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("Service name as Host without the token: %d %s", w.Code, w.Body)
	}
}

// countingBackend's Drift counts its calls (each one a relist of the
// store) and blocks until released.
type countingBackend struct {
	*fakeBackend
	calls   atomic.Int32
	release chan struct{}
}

func (b *countingBackend) Drift(ctx context.Context) (reconcile.DriftReport, error) {
	b.calls.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
		return reconcile.DriftReport{}, ctx.Err()
	}
	return reconcile.DriftReport{ReplicaID: "r1"}, nil
}

// 20 concurrent GET /v1/drift cause one store read, not 20.
func TestDriftCoalesced(t *testing.T) {
	b := &countingBackend{fakeBackend: newFake(), release: make(chan struct{})}
	h := NewHandler(Options{Backend: b})
	srv := serve(t, h)
	const n = 20
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = send(t, srv, "GET", "/v1/drift", "127.0.0.1", nil)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for b.calls.Load() != 1 || h.drift.Waiting() != n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("calls %d, waiting %d", b.calls.Load(), h.drift.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
	close(b.release)
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("request %d: %d", i, c)
		}
	}
	if got := b.calls.Load(); got != 1 {
		t.Fatalf("%d concurrent requests read the store %d times, want 1", n, got)
	}
}
