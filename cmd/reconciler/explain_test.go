package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// eachStore runs f as a parallel subtest on a fresh PostgreSQL database
// and on a fresh SQLite file, both migrated.
func eachStore(t *testing.T, f func(t *testing.T, url string)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		f(t, snapshottest.NewPostgresURL(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, snapshottest.NewSQLiteURL(t))
	})
}

// explainedItem is the part of GET /v1/item these tests read.
type explainedItem struct {
	Kind       string `json:"kind"`
	Key        string `json:"key"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
	Remedy     string `json:"remedy"`
	References []struct {
		Kind     string `json:"kind"`
		Type     string `json:"type"`
		Name     string `json:"name"`
		Resolved string `json:"resolved"`
	} `json:"references"`
	Dependents []struct {
		Kind string `json:"kind"`
		Key  string `json:"key"`
	} `json:"dependents"`
	History []struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	} `json:"history"`
}

// On the HotCRM corpus, through the CLI and the API of a running daemon:
// explain of a hook naming Account (not account) names the missing
// object; object/account lists its references, its 19 direct referrers
// and a history from its creation; items --root-causes collapses the 63
// held items onto the missing names; the filters select by type and page.
func TestExplainCorpusProcess(t *testing.T) {
	t.Parallel()
	items, err := corpus.Load()
	if err != nil {
		t.Fatal(err)
	}
	eachStore(t, func(t *testing.T, url string) {
		for _, it := range items {
			snapshottest.Exec(t, url, corpus.Insert, it.Row()...)
		}
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ('hook-draft', 'hook', 'AccountHealthScoreTrigger', 'draft', '{"object":"account"}')`)
		dir := t.TempDir()
		d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--store.url", url, "--poll.interval", "200ms",
			"--hint.listen=false", "--drift.dir", "./drift"}})
		eventually(t, 60*time.Second, "synced", func() bool { code, _ := d.request("GET", "/readyz"); return code == 200 })

		r := reconciler(t, dir, nil, "explain", "hook/AccountHealthScoreTrigger", "--addr", d.addr)
		if r.code != 0 || !strings.Contains(r.stdout, "references missing object Account") || !strings.Contains(r.stdout, "missing") ||
			!strings.Contains(r.stdout, "beside it: hook-draft (draft") {
			t.Errorf("explain hook: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = reconciler(t, dir, nil, "explain", "--kind", "hook", "AccountHealthScoreTrigger", "--json", "--addr", d.addr)
		var hooks []explainedItem // without --kind engine: every entry under the key
		var hook explainedItem
		if err := json.Unmarshal([]byte(r.stdout), &hook); err != nil {
			if err := json.Unmarshal([]byte(r.stdout), &hooks); err != nil || len(hooks) != 1 {
				t.Fatalf("explain --json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
			}
			hook = hooks[0]
		}
		missing := 0
		for _, ref := range hook.References {
			if ref.Resolved == "missing" {
				missing++
				if ref.Type != "object" || ref.Name != "Account" {
					t.Errorf("hook: missing %+v, want object Account", ref)
				}
			}
		}
		if missing != 1 || hook.State != "held" {
			t.Errorf("hook: %s, %d missing references: %+v", hook.State, missing, hook.References)
		}

		code, body := d.request("GET", "/v1/item?kind=engine&key=object/account")
		var acc explainedItem
		if err := json.Unmarshal(body, &acc); code != 200 || err != nil {
			t.Fatalf("GET /v1/item: %d %v %s", code, err, body)
		}
		if !strings.Contains(string(body), `"references": [`) || len(acc.References) == 0 {
			t.Errorf("account's references: %s", body)
		}
		if len(acc.Dependents) != 19 {
			t.Errorf("account: %d dependents, want 19", len(acc.Dependents))
		}
		for _, dep := range acc.Dependents {
			if dep.Key == "object/account" {
				t.Error("account lists itself among its dependents")
			}
		}
		if len(acc.History) == 0 || acc.History[0].State != "pending" || acc.History[len(acc.History)-1].State != acc.State {
			t.Errorf("account's history: %+v (state %s)", acc.History, acc.State)
		}
		// The status page links the hook to its explanation, a page.
		if code, page := d.request("GET", "/"); code != 200 || !strings.Contains(string(page), `<a href="/item?kind=engine&key=hook%2fAccountHealthScoreTrigger">`) {
			t.Errorf("status page (%d) does not link the hook to its explanation", code)
		}
		if code, page := d.request("GET", "/item?kind=engine&key=hook%2fAccountHealthScoreTrigger"); code != 200 || !strings.Contains(string(page), "references missing object Account") {
			t.Errorf("the hook's page: %d\n%s", code, page)
		}
		if code, body := d.request("GET", "/v1/item?kind=engine&key=object/nope"); code != 404 {
			t.Errorf("unknown key: %d %s", code, body)
		}

		r = reconciler(t, dir, nil, "items", "--root-causes", "--json", "--addr", d.addr)
		var causes []struct {
			Cause string   `json:"cause"`
			Held  []string `json:"held"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &causes); r.code != 0 || err != nil {
			t.Fatalf("items --root-causes: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		held := map[string]bool{}
		for _, c := range causes {
			if !strings.HasPrefix(c.Cause, "missing ") {
				t.Errorf("cause %q: want only missing names", c.Cause)
			}
			for _, h := range c.Held {
				held[h] = true
			}
		}
		if len(held) != 63 {
			t.Errorf("root causes hold %d items, want 63", len(held))
		}
		r = reconciler(t, dir, nil, "items", "--root-causes", "--addr", d.addr)
		if r.code != 0 || !strings.Contains(r.stdout, "63 held entries onto") {
			t.Errorf("items --root-causes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}

		// --kind takes the engine type as typed; --limit pages.
		r = reconciler(t, dir, nil, "items", "--kind", "view", "--json", "--addr", d.addr)
		var views []item
		if err := json.Unmarshal([]byte(r.stdout), &views); r.code != 0 || err != nil || len(views) != 6 {
			t.Errorf("items --kind view: exit %d, %d items %v\n%s", r.code, len(views), err, r.stderr)
		}
		r = reconciler(t, dir, nil, "items", "--kind", "object", "--state", "held", "--limit", "5", "--addr", d.addr)
		if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 7 || !strings.HasPrefix(lines[6], "(more: --after engine/object/") {
			t.Errorf("items --limit 5: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if i := strings.Index(line, "references missing"); i > 60 {
				t.Errorf("the reason starts at column %d (want it within a 100-column screen): %q", i, line)
			}
		}
		if r := reconciler(t, dir, nil, "items", "--kind", "Object", "--addr", d.addr); r.code != 2 || !strings.Contains(r.stderr, "metadata type") {
			t.Errorf("items --kind Object: exit %d %s", r.code, r.stderr)
		}
	})
}

// A connector held on 401 heals by retry alone once the upstream accepts
// (no row changes, no restart); a pass without the retry leaves it held;
// the retry is counted.
func TestRetryHealsHeldConnectorProcess(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		var accept atomic.Bool
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !accept.Load() {
				http.Error(w, "token disabled", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(up.Close)
		dir := t.TempDir()
		d := crmDaemon(t, dir, url, up.URL)
		eventually(t, 60*time.Second, "crm held", func() bool {
			it, ok := d.item("connector", "crm")
			return ok && it.State == "held" && it.Reason == "refused upstream: 401"
		})
		accept.Store(true) // the token re-enabled upstream: no row changes
		if code, _ := d.request("POST", "/v1/reconcile"); code != 202 {
			t.Fatalf("POST /v1/reconcile: %d", code)
		}
		passes := func() int64 {
			_, body := d.request("GET", "/v1/status")
			var st struct {
				Passes int64 `json:"passes"`
			}
			_ = json.Unmarshal(body, &st)
			return st.Passes
		}
		before := passes()
		eventually(t, 10*time.Second, "two more passes", func() bool { return passes() >= before+2 })
		if it, _ := d.item("connector", "crm"); it.State != "held" {
			t.Fatalf("crm %s without a retry (held entries have no retry timer)", it.State)
		}
		r := reconciler(t, dir, nil, "retry", "nope", "--addr", d.addr)
		if r.code != 1 || !strings.Contains(r.stderr, "no entry") {
			t.Errorf("retry of a key no entry has: exit %d %s", r.code, r.stderr)
		}
		r = reconciler(t, dir, nil, "retry", "--kind", "connector", "crm", "--addr", d.addr)
		if r.code != 0 || !strings.Contains(r.stdout, "ready") {
			t.Fatalf("retry: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if it, _ := d.item("connector", "crm"); it.State != "ready" {
			t.Fatalf("crm after retry: %+v", it)
		}
		_, metrics := d.request("GET", "/metrics")
		if !strings.Contains(string(metrics), `reconciler_retries_total{cause="requested",kind="connector"} 1`) {
			t.Errorf("retries not counted:\n%s", grepLines(string(metrics), "reconciler_retries_total"))
		}
		code, body := d.request("GET", "/v1/item?kind=connector&key=crm")
		var x explainedItem
		if err := json.Unmarshal(body, &x); code != 200 || err != nil {
			t.Fatalf("GET /v1/item: %d %v", code, err)
		}
		var states []string
		for _, h := range x.History {
			states = append(states, h.State)
		}
		if strings.Join(states, " ") != "pending held ready" {
			t.Errorf("history: %v", states)
		}
		r = reconciler(t, dir, nil, "retry", "--held", "--addr", d.addr)
		if r.code != 0 || !strings.Contains(r.stdout, "nothing to retry") {
			t.Errorf("retry --held with nothing held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// crmDaemon writes the connector crm (bearer credential crm-token) whose
// upstream is upURL and starts a daemon in dir on the store at url, with
// args beside the common ones.
func crmDaemon(t *testing.T, dir, url, upURL string, args ...string) *proc {
	t.Helper()
	snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ('crm-token', 'tok')`)
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('c1', 'connector', 'crm', $1)`,
		connectorBody(upURL, "crm-token"))
	return startDaemon(t, daemonOpts{dir: dir, args: append([]string{"--store.url", url, "--poll.interval", "200ms",
		"--hint.listen=false", "--drift.dir", "./drift"}, args...)})
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// With revalidate.interval 2s, a ready connector whose upstream starts
// refusing its token turns held with no row change (and says so in its
// history); a retry once the upstream accepts again heals it.
func TestRevalidateProcess(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		var refuse atomic.Bool
		var probes atomic.Int64
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			probes.Add(1)
			if refuse.Load() {
				http.Error(w, "token revoked", http.StatusForbidden)
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(up.Close)
		dir := t.TempDir()
		d := crmDaemon(t, dir, url, up.URL, "--revalidate.interval", "2s")
		eventually(t, 60*time.Second, "crm ready", func() bool {
			it, ok := d.item("connector", "crm")
			return ok && it.State == "ready"
		})
		ready, _ := d.item("connector", "crm")
		eventually(t, 10*time.Second, "a revalidation probe", func() bool { return probes.Load() >= 2 })
		refuse.Store(true) // revoked upstream: no row changes
		took := eventually(t, 10*time.Second, "crm held by revalidation", func() bool {
			it, ok := d.item("connector", "crm")
			return ok && it.State == "held"
		})
		it, _ := d.item("connector", "crm")
		if it.Reason != "revalidation: refused upstream: 403" || it.Revision != ready.Revision {
			t.Errorf("held: %+v (revision before %d)", it, ready.Revision)
		}
		t.Logf("held %s after the upstream started refusing (revalidate.interval 2s)", took.Round(time.Millisecond))
		_, metrics := d.request("GET", "/metrics")
		if !strings.Contains(string(metrics), `reconciler_revalidations_total{kind="connector",result="held"} 1`) {
			t.Errorf("revalidation not counted:\n%s", grepLines(string(metrics), "reconciler_revalidations_total"))
		}
		refuse.Store(false)
		if r := reconciler(t, dir, nil, "retry", "--held", "--addr", d.addr); r.code != 0 || !strings.Contains(r.stdout, "ready") {
			t.Errorf("retry --held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
