package statusapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

type pageReplicaFake struct{}

func (pageReplicaFake) ItemReplica(kind registry.Kind, key string) *registry.ReplicaStatus {
	if key == "flow/<b>f</b>" {
		return &registry.ReplicaStatus{State: registry.ReplicaStale, Remedy: "restart <the> replica", Since: time.Now().Add(-time.Minute)}
	}
	return &registry.ReplicaStatus{State: registry.ReplicaInSync, Since: time.Now()}
}
func (pageReplicaFake) ReplicaSummary() *registry.ReplicaReport {
	return &registry.ReplicaReport{Counts: map[registry.ReplicaState]int{registry.ReplicaInSync: 1, registry.ReplicaStale: 1}, Reachable: true,
		Restart: &registry.ReplicaRestart{Enabled: true, NodeRestart: registry.NodeRestart{Phase: registry.RestartRefused, Reason: "replica r2" + hostile + " is restarting"}}}
}

const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>` + "\u202egnp.exe\u2028\u200b"

func pageHandler(t *testing.T, token string, fleetErr error) *Handler {
	t.Helper()
	b := newFake()
	b.regs.Of(registry.KindEngine).Put(registry.Entry{Key: "flow/<b>f</b>", Revision: 9, State: registry.StateHeld, Reason: "references missing object " + hostile, Since: time.Now().Add(-time.Hour)})
	return NewHandler(Options{Backend: b, Token: token, Version: "v-test", Store: "sqlite://x", Replica: pageReplicaFake{},
		Fleet: func(context.Context) (fleet.View, error) {
			if fleetErr != nil {
				return fleet.View{}, fleetErr
			}
			now := time.Now()
			return fleet.Build(snapshot.Watermark{Seq: 10, At: now}, []snapshot.Heartbeat{
				{ReplicaID: "r1", Host: "h1", HeartbeatAt: now, CursorSeq: 10, CursorAt: now, Counts: map[string]int64{"connector/held": 1}},
				{ReplicaID: "r2" + hostile, Host: "h2", HeartbeatAt: now.Add(-time.Hour), CursorSeq: 2, CursorAt: now.Add(-time.Hour), LastError: hostile},
				{ReplicaID: "r3", Host: "h3", HeartbeatAt: now, CursorSeq: 10, Clash: "h4 pid " + hostile, ClashAt: now},
				{ReplicaID: "r-gone", Host: "h-gone", HeartbeatAt: now.Add(-2 * time.Hour), CursorSeq: 1, Stopped: true},
			}, 5*time.Second, now), nil
		}})
}

func getPage(h http.Handler, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Host = "127.0.0.1:9477"
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestPageRendersAndEscapes(t *testing.T) {
	t.Parallel()
	w := getPage(pageHandler(t, "", nil))
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	body := w.Body.String()
	for _, want := range []string{
		`<meta http-equiv="refresh" content="5">`,
		"crm", "refused upstream: 401", // the fake's held connector and its reason
		"flow/&lt;b&gt;f&lt;/b&gt;", "references missing object &lt;script&gt;",
		"restart &lt;the&gt; replica", // the replica's remedy
		"states.stale", "r2&lt;script&gt;", "stale</span>",
		"replica id shared with h4 pid &lt;script&gt;", // two processes writing r3's heartbeat
		"refused: replica r2&lt;script&gt;",            // the restart, a peer's id escaped
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "h-gone") {
		t.Error("the page lists a replica stopped two hours ago")
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "<img") || strings.Contains(body, "<b>") {
		t.Error("a row-derived string reached the page unescaped")
	}
	// Bidi overrides, separators and zero-width characters show as text.
	if strings.ContainsAny(body, "\u202e\u2028\u200b") || !strings.Contains(body, `\u202egnp.exe\u2028\u200b`) {
		t.Error("bidi or separator characters reached the page raw")
	}
	// No external asset: no src or href at all, no url() in the style.
	if m := regexp.MustCompile(`(?i)<[^>]*\b(src|href)\s*=|url\(`).FindString(body); m != "" {
		t.Errorf("page refers to an asset: %q", m)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	// Only GET / is the page; other paths stay 404.
	r := httptest.NewRequest(http.MethodGet, "/nope", nil)
	r.Host = "127.0.0.1:9477"
	nw := httptest.NewRecorder()
	pageHandler(t, "", nil).ServeHTTP(nw, r)
	if nw.Code != http.StatusNotFound {
		t.Errorf("GET /nope: %d", nw.Code)
	}
}

func TestPageFleetUnavailable(t *testing.T) {
	t.Parallel()
	body := getPage(pageHandler(t, "", errors.New("read heartbeats: <down>"))).Body.String()
	if !strings.Contains(body, "fleet unavailable") || !strings.Contains(body, "read heartbeats: &lt;down&gt;") {
		t.Errorf("fleet error not shown:\n%s", body)
	}
}

func TestPageToken(t *testing.T) {
	t.Parallel()
	const token = "page-canary-token"
	h := pageHandler(t, token, nil)
	basic := func(user, pw string) string {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.SetBasicAuth(user, pw)
		return r.Header.Get("Authorization")
	}
	for _, tc := range []struct {
		name, auth string
		code       int
	}{
		{"none", "", http.StatusUnauthorized},
		{"wrong basic", basic("admin", "nope"), http.StatusUnauthorized},
		{"wrong bearer", "Bearer nope", http.StatusUnauthorized},
		{"basic", basic("anyone", token), http.StatusOK},
		{"bearer", "Bearer " + token, http.StatusOK},
	} {
		w := getPage(h, "Authorization", tc.auth)
		if w.Code != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.code)
		}
		if tc.code == http.StatusUnauthorized && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s: WWW-Authenticate %q: a browser would not ask for the token", tc.name, w.Header().Get("WWW-Authenticate"))
		}
		if strings.Contains(w.Body.String(), token) {
			t.Errorf("%s: the token is on the page", tc.name)
		}
	}
}

// guardedBackend is the fake with a tripped guard.
type guardedBackend struct{ *fakeBackend }

func (b guardedBackend) Status() reconcile.Status {
	st := b.fakeBackend.Status()
	st.Guard = reconcile.GuardStatus{Held: 30, Kinds: map[registry.Kind]int{registry.KindEngine: 30}, Since: time.Now().Add(-time.Minute),
		Keys:   []reconcile.GuardedKey{{Kind: registry.KindEngine, Key: "object/gobj<i>02</i>", Revision: 3, Since: time.Now().Add(-time.Minute)}},
		Reason: "eviction guarded: 30 of 32 engine entries would go in one pass", Limit: "20%", Window: "1m0s"}
	return st
}

// TestPageShowsTheGuard: a tripped guard is on the page with its reason
// and keys (escaped) and what to do; an idle one says nothing is held.
func TestPageShowsTheGuard(t *testing.T) {
	t.Parallel()
	body := getPage(NewHandler(Options{Backend: guardedBackend{newFake()}})).Body.String()
	for _, want := range []string{"holding 30 evictions", "30 of 32 engine entries would go in one pass", "object/gobj&lt;i&gt;02&lt;/i&gt;", "reconciler guard release --store.url URL"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if body := getPage(NewHandler(Options{Backend: newFake()})).Body.String(); !strings.Contains(body, "Nothing held") {
		t.Error("an idle guard: page lacks \"Nothing held\"")
	}
}
