package statusapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeBackend struct {
	regs     *registry.Set
	synced   chan struct{}
	triggers atomic.Int32
	resyncs  atomic.Int32
	driftErr error
}

func newFake() *fakeBackend {
	b := &fakeBackend{regs: registry.NewSet(), synced: make(chan struct{})}
	b.regs.Of(registry.KindConnector).Put(registry.Entry{Key: "crm", Revision: 7, State: registry.StateHeld, Reason: "refused upstream: 401"})
	b.regs.Of(registry.KindEngine).Put(registry.Entry{Key: "object/account", Revision: 3, State: registry.StateReady, ServingRevision: 3})
	return b
}

func (b *fakeBackend) Status() reconcile.Status {
	return reconcile.Status{ReplicaID: "r1", Synced: true, Counts: map[registry.Kind]map[registry.State]int{registry.KindConnector: {registry.StateHeld: 1}}}
}
func (b *fakeBackend) Registries() registry.View { return b.regs.View() }
func (b *fakeBackend) Synced() <-chan struct{}   { return b.synced }
func (b *fakeBackend) Reconcile()                { b.triggers.Add(1) }
func (b *fakeBackend) Resync()                   { b.resyncs.Add(1) }
func (b *fakeBackend) Drift(context.Context) (reconcile.DriftReport, error) {
	if b.driftErr != nil {
		return reconcile.DriftReport{}, b.driftErr
	}
	return reconcile.DriftReport{ReplicaID: "r1", Summary: reconcile.DriftSummary{NotReady: 1}}, nil
}

func do(t testing.TB, h http.Handler, method, target, token string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Host = "127.0.0.1:9477"
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestEndpoints(t *testing.T) {
	b := newFake()
	reg := prometheus.NewRegistry()
	reconcile.NewMetrics(reg)
	h := NewHandler(Options{Backend: b, Gatherer: reg, Version: "v-test", Store: "sqlite://x"})
	for _, tc := range []struct {
		method, target string
		code           int
		contains       string
	}{
		{"GET", "/healthz", 200, `"ok"`},
		{"GET", "/readyz", 503, "not synced"},
		{"GET", "/metrics", 200, "reconciler_cursor_lag_seconds"},
		{"GET", "/v1/status", 200, `"version": "v-test"`},
		{"GET", "/v1/items", 200, `"object/account"`},
		{"GET", "/v1/items?kind=connector", 200, `"refused upstream: 401"`},
		{"GET", "/v1/items?kind=connector&state=ready", 200, "[]"},
		{"GET", "/v1/items?state=held", 200, `"crm"`},
		{"GET", "/v1/items?kind=bogus", 400, "unknown kind"},
		{"GET", "/v1/items?state=bogus", 400, "unknown state"},
		{"GET", "/v1/items?colour=red", 400, "unknown parameter"},
		{"GET", "/v1/items?kind=%zz", 400, "malformed"},
		{"POST", "/v1/reconcile", 202, "reconcile"},
		{"POST", "/v1/resync", 202, "resync"},
		{"GET", "/v1/drift", 200, `"not_ready": 1`},
		{"POST", "/v1/drift", 405, "not enabled"},
		{"GET", "/v1/reconcile", 405, ""},
		{"DELETE", "/v1/items", 405, ""},
		{"POST", "/healthz", 405, ""},
		{"GET", "/nope", 404, ""},
	} {
		w := do(t, h, tc.method, tc.target, "")
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.contains) {
			t.Errorf("%s %s: %d %q, want %d containing %q", tc.method, tc.target, w.Code, w.Body.String(), tc.code, tc.contains)
		}
	}
	if b.triggers.Load() != 1 || b.resyncs.Load() != 1 {
		t.Fatalf("triggers=%d resyncs=%d", b.triggers.Load(), b.resyncs.Load())
	}
	close(b.synced)
	if w := do(t, h, "GET", "/readyz", ""); w.Code != 200 {
		t.Fatalf("readyz after sync: %d", w.Code)
	}
	var items []registry.Entry
	if err := json.Unmarshal(do(t, h, "GET", "/v1/items", "").Body.Bytes(), &items); err != nil || len(items) != 2 || items[0].Kind != registry.KindConnector {
		t.Fatalf("items %v %v", items, err)
	}
}

func TestToken(t *testing.T) {
	b := newFake()
	h := NewHandler(Options{Backend: b, Token: "s3cret", Gatherer: prometheus.NewRegistry()})
	for _, p := range []string{"/v1/status", "/v1/items", "/v1/drift", "/metrics"} {
		if w := do(t, h, "GET", p, ""); w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s without token: %d", p, w.Code)
		}
		if w := do(t, h, "GET", p, "wrong"); w.Code != 401 {
			t.Errorf("%s wrong token: %d", p, w.Code)
		}
		if w := do(t, h, "GET", p, "s3cret"); w.Code != 200 {
			t.Errorf("%s with token: %d", p, w.Code)
		}
	}
	if w := do(t, h, "POST", "/v1/reconcile", ""); w.Code != 401 || b.triggers.Load() != 0 {
		t.Fatalf("unauthenticated trigger: %d", w.Code)
	}
	if w := do(t, h, "GET", "/healthz", ""); w.Code != 200 {
		t.Fatalf("healthz needs no token: %d", w.Code)
	}
}

func TestDriftError(t *testing.T) {
	b := newFake()
	b.driftErr = errors.New("store unavailable")
	h := NewHandler(Options{Backend: b, WriteDrift: func(context.Context) (reconcile.DriftReport, error) {
		return reconcile.DriftReport{}, errors.New("disk full")
	}})
	if w := do(t, h, "GET", "/v1/drift", ""); w.Code != 503 {
		t.Fatalf("%d", w.Code)
	}
	if w := do(t, h, "POST", "/v1/drift", ""); w.Code != 503 || !strings.Contains(w.Body.String(), "disk full") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestServerRun(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", NewHandler(Options{Backend: newFake()}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	resp, err := http.Get("http://" + srv.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	// The address is taken while it runs.
	if _, err := Listen(srv.Addr(), http.NotFoundHandler()); err == nil {
		t.Fatal("second listener on a bound address")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	http.DefaultClient.CloseIdleConnections()
}

func FuzzHandler(f *testing.F) {
	f.Add("GET", "/v1/items", "kind=engine&state=ready", "Bearer t")
	f.Add("POST", "/v1/resync", "", "")
	f.Add("GET", "/v1/items", "kind=%00", "Bearer x")
	f.Add("PUT", "/../v1/status", ";;", "Basic x")
	f.Add("GET", "//metrics", "a=b", "Bearer t")
	b := newFake()
	reg := prometheus.NewRegistry()
	h := NewHandler(Options{Backend: b, Token: "t", Gatherer: reg})
	f.Fuzz(func(t *testing.T, method, path, query, auth string) {
		if !validMethod(method) {
			return
		}
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{}, Body: http.NoBody, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "localhost"}
		r.RequestURI = r.URL.RequestURI()
		r = r.WithContext(context.Background())
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s?%s: %d %s", method, path, query, w.Code, w.Body)
		}
		if w.Code == 200 && auth != "Bearer t" && path != "/healthz" && path != "/readyz" {
			t.Fatalf("%s %s served without the token", method, path)
		}
		if strings.HasPrefix(path, "/v1/") && w.Code < 300 && w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: not JSON", path)
		}
	})
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, r := range m {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	return true
}

// TestItemsCarryKeyParts: every /v1/items entry carries its key's parts
// as fields (org, type, name, package), decoded, and empty parts as "".
func TestItemsCarryKeyParts(t *testing.T) {
	b := newFake()
	b.regs.Of(registry.KindEngine).Put(registry.Entry{Key: registry.EngineKey("acme:eu", "view", "all/open", "crm@2"), Revision: 4, State: registry.StateReady})
	h := NewHandler(Options{Backend: b, Gatherer: prometheus.NewRegistry()})
	var items []map[string]any
	if err := json.Unmarshal(do(t, h, "GET", "/v1/items?kind=engine", "").Body.Bytes(), &items); err != nil {
		t.Fatal(err)
	}
	want := map[string][4]string{
		"object/account":                    {"", "object", "account", ""},
		"acme%3Aeu:view/all%2Fopen@crm%402": {"acme:eu", "view", "all/open", "crm@2"},
	}
	if len(items) != len(want) {
		t.Fatalf("items %v, want %d", items, len(want))
	}
	for _, it := range items {
		w, ok := want[it["key"].(string)]
		if !ok {
			t.Fatalf("unexpected item %v", it)
		}
		for i, f := range []string{"org", "type", "name", "package"} {
			if v, ok := it[f].(string); !ok || v != w[i] {
				t.Errorf("%s: %s = %#v, want %q", it["key"], f, it[f], w[i])
			}
		}
	}
	var conn []map[string]any
	if err := json.Unmarshal(do(t, h, "GET", "/v1/items?kind=connector", "").Body.Bytes(), &conn); err != nil || len(conn) != 1 {
		t.Fatalf("connector items %v %v", conn, err)
	}
	for f, w := range map[string]string{"org": "", "type": "", "name": "crm", "package": ""} {
		if v, ok := conn[0][f].(string); !ok || v != w {
			t.Errorf("connector crm: %s = %#v, want %q", f, conn[0][f], w)
		}
	}
}
