package connector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/drivers/connector"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const canary = "canary-s3cr3t-5b1f0c"

// upstream is an httptest server answering by path; paths under /auth/
// demand the canary credential in whichever form the query names.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	seen []http.Header
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	mux := http.NewServeMux()
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
	}
	for _, code := range []int{200, 204, 302, 401, 403, 404, 408, 429, 500, 503} {
		mux.Handle(fmt.Sprintf("/status/%d", code), status(code))
	}
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/auth/", func(w http.ResponseWriter, r *http.Request) {
		ok := false
		switch r.URL.Query().Get("want") {
		case "bearer":
			ok = r.Header.Get("Authorization") == "Bearer "+canary
		case "api-key":
			ok = r.Header.Get(r.URL.Query().Get("header")) == canary
		case "basic":
			user, pass, _ := r.BasicAuth()
			ok = user == "svc" && pass == canary
		case "none":
			ok = r.Header.Get("Authorization") == ""
		}
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if strings.HasSuffix(r.URL.Path, ".json") {
			_, _ = io.WriteString(w, `{"openapi":"3.0.3","info":{"title":"crm"},"paths":{}}`)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "openapi: 3.1.0\ninfo:\n  title: crm\npaths: {}\n")
	})
	mux.HandleFunc("/swagger.json", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"swagger":"2.0"}`)
	})
	mux.HandleFunc("/garbage", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html>[not json: {")
	})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Clone())
		u.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func body(provider, baseURL, probePath, extra string, auth string) string {
	pc := fmt.Sprintf(`"baseUrl":%q`, baseURL)
	if probePath != "" {
		pc += fmt.Sprintf(`,"probe":{"method":"GET","path":%q}`, probePath)
	}
	if extra != "" {
		pc += "," + extra
	}
	b := fmt.Sprintf(`{"provider":%q,"providerConfig":{%s}`, provider, pc)
	if auth != "" {
		b += `,"auth":` + auth
	}
	return b + `,"enabled":true}`
}

func desired(b string, value string) reconcile.Desired {
	return reconcile.Desired{
		Kind: registry.KindConnector, Key: "crm", Revision: 3,
		Body:          json.RawMessage(b),
		Metadata:      &snapshot.MetadataRow{ID: "m1", Type: "connector", Name: "crm", State: "active", Metadata: json.RawMessage(b), Revision: 3},
		CredentialRef: "crm-token",
		Secret:        secret.New(value),
	}
}

// debugLogger captures every log line at debug level.
func debugLogger() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(h), &buf
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

const bearer = `{"type":"bearer","credentialRef":"crm-token"}`

func TestMaterialize(t *testing.T) {
	up := newUpstream(t)
	log, logs := debugLogger()
	m := connector.New(connector.Options{Logger: log})
	type want struct {
		class  reconcile.Class
		reason string // exact, or prefix when ending in "…"
	}
	ready := want{class: -1}
	tests := []struct {
		name   string
		body   string
		secret string
		want   want
	}{
		{"rest bearer 200", body("rest", up.URL, "/auth/x?want=bearer", "", bearer), canary, ready},
		{"rest 204 no auth", body("rest", up.URL, "/status/204", "", `{"type":"none"}`), "", ready},
		{"rest no auth member", body("rest", up.URL+"/auth/x?want=none", "", "", ""), "", ready},
		{"rest api-key default header", body("rest", up.URL, "/auth/x?want=api-key&header=X-API-Key", "", `{"type":"api-key","credentialRef":"crm-token"}`), canary, ready},
		{"rest api-key custom header", body("rest", up.URL, "/auth/x?want=api-key&header=X-Token", "", `{"type":"api-key","credentialRef":"crm-token","header":"X-Token"}`), canary, ready},
		{"rest basic", body("rest", up.URL, "/auth/x?want=basic", "", `{"type":"basic","credentialRef":"crm-token"}`), "svc:" + canary, ready},
		{"rest base path joins probe", body("rest", up.URL+"/auth", "/x?want=bearer", "", bearer), canary, ready},
		{"openapi json", body("openapi", up.URL, "", `"specUrl":"/auth/spec.json?want=bearer"`, bearer), canary, ready},
		{"openapi yaml and probe", body("openapi", up.URL, "/auth/x?want=bearer", `"specUrl":"`+up.URL+`/openapi.yaml"`, bearer), canary, ready},
		{"wrong credential 401", body("rest", up.URL, "/auth/x?want=bearer", "", bearer), "wrong-" + canary, want{reconcile.ClassRefused, "refused upstream: 401"}},
		{"401", body("rest", up.URL, "/status/401", "", bearer), canary, want{reconcile.ClassRefused, "refused upstream: 401"}},
		{"403", body("rest", up.URL, "/status/403", "", bearer), canary, want{reconcile.ClassRefused, "refused upstream: 403"}},
		{"openapi spec refused", body("openapi", up.URL, "", `"specUrl":"/auth/spec.json?want=bearer"`, bearer), "nope", want{reconcile.ClassRefused, "refused upstream: 401"}},
		{"404", body("rest", up.URL, "/status/404", "", bearer), canary, want{reconcile.ClassInvalid, "probe GET /status/404 answered 404"}},
		{"302 elsewhere", body("rest", up.URL, "/status/302", "", bearer), canary, want{reconcile.ClassInvalid, "probe GET /status/302 answered 302"}},
		{"408", body("rest", up.URL, "/status/408", "", bearer), canary, want{reconcile.ClassTransient, "probe GET /status/408 answered 408"}},
		{"429", body("rest", up.URL, "/status/429", "", bearer), canary, want{reconcile.ClassTransient, "probe GET /status/429 answered 429"}},
		{"500", body("rest", up.URL, "/status/500", "", bearer), canary, want{reconcile.ClassTransient, "probe GET /status/500 answered 500"}},
		{"503", body("rest", up.URL, "/status/503", "", bearer), canary, want{reconcile.ClassTransient, "probe GET /status/503 answered 503"}},
		{"hang", body("rest", up.URL, "/hang", `"timeout":"50ms"`, bearer), canary, want{reconcile.ClassTransient, "probe GET /hang: timed out after 50ms"}},
		{"openapi not openapi", body("openapi", up.URL, "", `"specUrl":"/swagger.json"`, bearer), canary, want{reconcile.ClassInvalid, "spec " + up.URL + "/swagger.json is not an OpenAPI document: missing the openapi member"}},
		{"openapi garbage", body("openapi", up.URL, "", `"specUrl":"/garbage"`, bearer), canary, want{reconcile.ClassInvalid, "spec " + up.URL + "/garbage is not an OpenAPI document…"}},
		{"openapi without specUrl", body("openapi", up.URL, "", "", bearer), canary, want{reconcile.ClassInvalid, "providerConfig.specUrl is required for provider openapi"}},
		{"mcp", body("mcp", up.URL, "/status/200", "", bearer), canary, want{reconcile.ClassInvalid, `unknown provider "mcp"`}},
		{"disabled", strings.Replace(body("rest", up.URL, "/status/200", "", bearer), `"enabled":true`, `"enabled":false`, 1), canary, want{reconcile.ClassInvalid, "connector disabled"}},
		{"bearer without secret", body("rest", up.URL, "/status/200", "", bearer), "", want{reconcile.ClassInvalid, "credential crm-token is empty"}},
		{"basic without colon", body("rest", up.URL, "/status/200", "", `{"type":"basic","credentialRef":"crm-token"}`), canary, want{reconcile.ClassInvalid, `credential crm-token is not "user:password" as basic auth needs`}},
		{"missing baseUrl", `{"provider":"rest","providerConfig":{}}`, canary, want{reconcile.ClassInvalid, "providerConfig.baseUrl is required"}},
		{"relative baseUrl", body("rest", "/api", "", "", ""), "", want{reconcile.ClassInvalid, "providerConfig.baseUrl must be an absolute http or https URL"}},
		{"bad timeout", body("rest", up.URL, "", `"timeout":"soon"`, ""), "", want{reconcile.ClassInvalid, `providerConfig.timeout must be a positive duration like "5s"`}},
		{"bad auth type", body("rest", up.URL, "", "", `{"type":"oauth"}`), "", want{reconcile.ClassInvalid, `auth.type is "oauth", not one of bearer, api-key, basic or none`}},
		{"missing credentialRef", body("rest", up.URL, "", "", `{"type":"bearer"}`), canary, want{reconcile.ClassInvalid, "auth.credentialRef is required for auth type bearer"}},
		{"bad header", body("rest", up.URL, "", "", `{"type":"api-key","credentialRef":"r","header":"X Key"}`), canary, want{reconcile.ClassInvalid, "auth.header is not a valid header name"}},
		{"not an object", `["rest"]`, "", want{reconcile.ClassInvalid, "body must be a JSON object"}},
		{"unreachable", body("rest", "http://127.0.0.1:1", "/health", "", bearer), canary, want{reconcile.ClassTransient, "probe GET /health: dial tcp 127.0.0.1:1…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			inst, err := m.Materialize(ctx, desired(tt.body, tt.secret))
			if tt.want == ready {
				if err != nil {
					t.Fatalf("Materialize: %v", err)
				}
				if s := fmt.Sprintf("%v %+v %#v", inst, inst, inst); strings.Contains(s, canary) {
					t.Errorf("instance prints the credential: %s", s)
				}
				if err := inst.Close(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				inst.Close()
				t.Fatalf("Materialize succeeded, want %v %q", tt.want.class, tt.want.reason)
			}
			class, reason := reconcile.Classify(err)
			ok := reason == tt.want.reason
			if p, cut := strings.CutSuffix(tt.want.reason, "…"); cut {
				ok = strings.HasPrefix(reason, p)
			}
			if class != tt.want.class || !ok {
				t.Errorf("got %v %q, want %v %q", class, reason, tt.want.class, tt.want.reason)
			}
			if strings.Contains(err.Error(), canary) || strings.Contains(fmt.Sprintf("%+v", err), canary) {
				t.Errorf("error leaks the credential: %v", err)
			}
		})
	}
	if strings.Contains(logs.String(), canary) {
		t.Errorf("debug logs leak the credential:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `"level":"DEBUG"`) {
		t.Errorf("expected debug logs, got:\n%s", logs)
	}
}

// An unknown provider is never executed: upstream sees nothing.
func TestUnknownProviderNeverExecuted(t *testing.T) {
	up := newUpstream(t)
	for _, p := range []string{"mcp", "grpc", "REST", "exec"} {
		_, err := connector.New(connector.Options{}).Materialize(context.Background(), desired(body(p, up.URL, "/status/200", `"specUrl":"/x"`, bearer), canary))
		if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || reason != fmt.Sprintf("unknown provider %q", p) {
			t.Errorf("%s: %v %q", p, class, reason)
		}
	}
	if n := up.hits.Load(); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}

func TestApplyTimeoutHonoured(t *testing.T) {
	up := newUpstream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := connector.New(connector.Options{}).Materialize(ctx, desired(body("rest", up.URL, "/hang", "", bearer), canary))
	if class, _ := reconcile.Classify(err); class != reconcile.ClassTransient || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Materialize = %v (%v), want transient deadline", err, class)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestClientDo(t *testing.T) {
	up := newUpstream(t)
	m := connector.New(connector.Options{})
	inst, err := m.Materialize(context.Background(), desired(body("rest", up.URL, "/auth/x?want=bearer", "", bearer), canary))
	if err != nil {
		t.Fatal(err)
	}
	c := inst.(*connector.Client)
	// A relative request gets baseUrl and the credential.
	req, _ := http.NewRequest(http.MethodGet, "/auth/accounts?want=bearer", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || req.Header.Get("Authorization") != "" {
		t.Fatalf("status %d; caller's request modified: %v", resp.StatusCode, req.Header)
	}
	req, err = c.NewRequest(context.Background(), http.MethodGet, "/auth/y?want=bearer", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err = c.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("NewRequest+Do: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(req); !errors.Is(err, connector.ErrClosed) {
		t.Fatalf("Do after Close = %v", err)
	}
}

// A redirect to another origin is not followed, so the credential stays home.
func TestRedirectStaysHome(t *testing.T) {
	other := newUpstream(t)
	home := httptest.NewServer(http.RedirectHandler(other.URL+"/status/200", http.StatusFound))
	defer home.Close()
	_, err := connector.New(connector.Options{}).Materialize(context.Background(), desired(body("rest", home.URL, "/health", "", bearer), canary))
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || reason != "probe GET /health answered 302" {
		t.Fatalf("got %v %q", class, reason)
	}
	if n := other.hits.Load(); n != 0 {
		t.Fatalf("other origin got %d requests", n)
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		body("rest", "https://api.test/v1", "/health", `"timeout":"5s"`, bearer),
		body("openapi", "https://api.test", "", `"specUrl":"/openapi.json"`, `{"type":"api-key","credentialRef":"k","header":"X-Key"}`),
		body("mcp", "https://x", "", "", ""),
		`{"provider":"rest","providerConfig":{"baseUrl":"http://[::1"}}`,
		`{"provider":"rest","providerConfig":{"baseUrl":"http://h","probe":{"method":"DELETE"}}}`,
		`{"provider":"rest","providerConfig":{"baseUrl":"http://h","probe":null},"auth":{"type":"basic","credentialRef":1}}`,
		`{"provider":"rest","enabled":"yes"}`,
		`null`, `{}`, `{"provider":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := connector.ParseSpec(b)
		if err != nil {
			return
		}
		if s.BaseURL == nil || (s.Provider == connector.ProviderOpenAPI && s.SpecURL == nil) {
			t.Fatalf("accepted spec without URLs: %+v", s)
		}
	})
}

// A row naming a probe path or spec URL on another origin than its
// baseUrl is held with a reason and never fetched: the foreign host sees
// no request, let alone the credential.
func TestCredentialOnlyToBaseOrigin(t *testing.T) {
	home := newUpstream(t)
	foreign := newUpstream(t)
	foreignHost := strings.TrimPrefix(foreign.URL, "http://")
	_, homePort, _ := strings.Cut(strings.TrimPrefix(home.URL, "http://"), ":")
	tests := []struct {
		name, body, reason string
	}{
		{"absolute probe path", body("rest", home.URL, foreign.URL+"/auth/x?want=bearer", "", bearer),
			"providerConfig.probe.path " + foreign.URL + "/auth/x?want=bearer is outside the origin of providerConfig.baseUrl (http://127.0.0.1:" + homePort + "): a credential is only sent there, so it is not fetched"},
		{"scheme-relative probe path", body("rest", home.URL, "//"+foreignHost+"/auth/x?want=bearer", "", bearer), "providerConfig.probe.path http://" + foreignHost + "/auth/x?want=bearer is outside…"},
		{"absolute spec URL", body("openapi", home.URL, "", `"specUrl":"`+foreign.URL+`/auth/spec.json?want=bearer"`, bearer), "providerConfig.specUrl " + foreign.URL + "/auth/spec.json?want=bearer is outside…"},
		{"spec URL with query token", body("openapi", home.URL, "", `"specUrl":"`+foreign.URL+`/spec.json?token=t0k"`, bearer), "providerConfig.specUrl " + foreign.URL + "/spec.json?token=xxxxx is outside…"},
		{"https base, http probe", body("rest", "https://"+strings.TrimPrefix(home.URL, "http://"), home.URL+"/auth/x?want=bearer", "", bearer), "providerConfig.probe.path " + home.URL + "/auth/x?want=bearer is outside…"},
		{"api-key to foreign spec", body("openapi", home.URL, "/status/200", `"specUrl":"`+foreign.URL+`/auth/spec.json?want=api-key&header=X-API-Key"`, `{"type":"api-key","credentialRef":"crm-token"}`), "providerConfig.specUrl " + foreign.URL + "/auth/spec.json?want=api-key&header=X-API-Key is outside…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, err := connector.New(connector.Options{}).Materialize(context.Background(), desired(tt.body, canary))
			if err == nil {
				inst.Close()
				t.Fatal("Materialize succeeded")
			}
			class, reason := reconcile.Classify(err)
			ok := reason == tt.reason
			if p, cut := strings.CutSuffix(tt.reason, "…"); cut {
				ok = strings.HasPrefix(reason, p)
			}
			if class != reconcile.ClassInvalid || !ok || !errors.Is(err, connector.ErrForeignOrigin) {
				t.Errorf("got %v %q (%v), want invalid %q", class, reason, err, tt.reason)
			}
		})
	}
	if n := foreign.hits.Load(); n != 0 {
		t.Fatalf("the foreign host got %d requests", n)
	}
	// The same origin spelled differently is the same origin.
	same := body("rest", home.URL+"/", "HTTP://127.0.0.1:"+homePort+"/auth/x?want=bearer", "", bearer)
	inst, err := connector.New(connector.Options{}).Materialize(context.Background(), desired(same, canary))
	if err != nil {
		t.Fatalf("same origin refused: %v", err)
	}
	inst.Close()
}

// A live client never sends its credential to another origin, whatever
// the caller asks.
func TestClientStaysAtOrigin(t *testing.T) {
	home := newUpstream(t)
	foreign := newUpstream(t)
	inst, err := connector.New(connector.Options{}).Materialize(context.Background(), desired(body("rest", home.URL, "/auth/x?want=bearer", "", bearer), canary))
	if err != nil {
		t.Fatal(err)
	}
	c := inst.(*connector.Client)
	defer c.Close()
	if _, err := c.NewRequest(context.Background(), "GET", foreign.URL+"/auth/x?want=bearer", nil); !errors.Is(err, connector.ErrForeignOrigin) {
		t.Errorf("NewRequest to another origin: %v", err)
	}
	req, _ := http.NewRequest("GET", foreign.URL+"/auth/x?want=bearer", nil)
	if resp, err := c.Do(req); !errors.Is(err, connector.ErrForeignOrigin) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Errorf("Do to another origin: %v", err)
	}
	req, _ = http.NewRequest("GET", home.URL+"/auth/x?want=bearer", nil)
	req.Host = "foreign.test"
	if resp, err := c.Do(req); !errors.Is(err, connector.ErrForeignOrigin) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Errorf("Do with a foreign Host header: %v", err)
	}
	if n := foreign.hits.Load(); n != 0 {
		t.Fatalf("the foreign host got %d requests", n)
	}
}

// A redirect to the same host on another port or scheme is another
// origin: not followed.
func TestRedirectOtherPortNotFollowed(t *testing.T) {
	other := newUpstream(t)
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/auth/x?want=bearer", http.StatusTemporaryRedirect)
	}))
	defer home.Close()
	_, err := connector.New(connector.Options{}).Materialize(context.Background(), desired(body("rest", home.URL, "/health", "", `{"type":"api-key","credentialRef":"crm-token"}`), canary))
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || reason != "probe GET /health answered 307" {
		t.Fatalf("got %v %q", class, reason)
	}
	if n := other.hits.Load(); n != 0 {
		t.Fatalf("other origin got %d requests", n)
	}
}

// An upstream answering with an endless document costs at most the
// configured cap: the connector is held with a reason naming
// connector.max_spec_bytes, and the rest of the answer is never read.
func TestAnswerCapNamed(t *testing.T) {
	var sent atomic.Int64
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(`{"openapi":"3.0.3","x":"` + strings.Repeat("x", 64<<10))
		for r.Context().Err() == nil && sent.Load() < 64<<20 {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer big.Close()
	m := connector.New(connector.Options{MaxSpecBytes: 1 << 20})
	for _, b := range []string{
		body("openapi", big.URL, "", `"specUrl":"/openapi.json"`, `{"type":"none"}`),
		body("rest", big.URL, "/health", "", `{"type":"none"}`),
	} {
		inst, err := m.Materialize(context.Background(), desired(b, ""))
		if err == nil {
			inst.Close()
			t.Fatal("Materialize succeeded")
		}
		class, reason := reconcile.Classify(err)
		if class != reconcile.ClassInvalid || !strings.Contains(reason, "answer is above the 1 MiB cap (connector.max_spec_bytes)") {
			t.Errorf("got %v %q, want invalid naming connector.max_spec_bytes", class, reason)
		}
	}
	if n := sent.Load(); n >= 64<<20 {
		t.Fatalf("the whole %d-byte answer was read", n)
	}
}

// The body caps are the configured ones (engine.max_body_bytes), not the
// defaults: a connector body above 1 MiB materializes under a 4 MiB cap,
// and is held naming the key under a smaller one.
func TestBodyCapsConfigured(t *testing.T) {
	up := newUpstream(t)
	b := body("rest", up.URL, "/status/200", `"notes":"`+strings.Repeat("x", 2<<20)+`"`, `{"type":"none"}`)
	inst, err := connector.New(connector.Options{Limits: metadata.Limits{MaxBodyBytes: 4 << 20}}).Materialize(context.Background(), desired(b, ""))
	if err != nil {
		t.Fatalf("a 2 MiB body under a 4 MiB cap: %v", err)
	}
	inst.Close()
	_, err = connector.New(connector.Options{Limits: metadata.Limits{MaxBodyBytes: 1 << 20}}).Materialize(context.Background(), desired(b, ""))
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || !strings.Contains(reason, "above the 1 MiB cap (engine.max_body_bytes)") {
		t.Fatalf("got %v %q", class, reason)
	}
}

// Materialize builds from d.Body, the one body a Desired carries; the row
// gives the name only.
func TestMaterializeReadsBody(t *testing.T) {
	up := newUpstream(t)
	m := connector.New(connector.Options{})
	d := desired(body("rest", up.URL, "/status/204", "", `{"type":"none"}`), "")
	d.Metadata.Metadata = json.RawMessage(`{"provider":"mcp"}`)
	inst, err := m.Materialize(context.Background(), d)
	if err != nil {
		t.Fatalf("Materialize: %v", err)
	}
	_ = inst.Close()
}
