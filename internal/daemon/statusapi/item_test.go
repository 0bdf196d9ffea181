package statusapi

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// /v1/items filters by the key's parts and pages: a full page links the
// next one, which resumes after its last item.
func TestItemsFiltersAndPages(t *testing.T) {
	b := newFake()
	for _, k := range []string{"org_1:object/lead", "object/lead@crm", "view/all_accounts"} {
		b.regs.Of(registry.KindEngine).Put(registry.Entry{Key: k, State: registry.StateReady})
	}
	h := NewHandler(Options{Backend: b})
	keys := func(target string) (string, string) {
		t.Helper()
		w := do(t, h, "GET", target, "")
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", target, w.Code, w.Body)
		}
		var items []Item
		if err := json.Unmarshal(w.Body.Bytes(), &items); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, string(it.Kind)+"/"+it.Key)
		}
		return strings.Join(out, " "), w.Header().Get("Link")
	}
	for _, tc := range []struct{ target, want string }{
		{"/v1/items?type=object", "engine/object/account engine/object/lead@crm engine/org_1:object/lead"},
		{"/v1/items?org=org_1", "engine/org_1:object/lead"},
		{"/v1/items?org=-&type=object", "engine/object/account engine/object/lead@crm"},
		{"/v1/items?package=crm", "engine/object/lead@crm"},
		{"/v1/items?kind=engine&limit=2&after=engine/object/account", "engine/object/lead@crm engine/org_1:object/lead"},
	} {
		if got, _ := keys(tc.target); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.target, got, tc.want)
		}
	}
	var all []string
	target := "/v1/items?limit=2"
	for target != "" {
		got, link := keys(target)
		if got != "" {
			all = append(all, got)
		}
		target = ""
		if link != "" {
			target = strings.TrimSuffix(strings.TrimPrefix(strings.Split(link, ";")[0], "<"), ">")
		}
	}
	if got := strings.Join(all, " "); got != "connector/crm engine/object/account engine/object/lead@crm engine/org_1:object/lead engine/view/all_accounts" {
		t.Errorf("pages: %s", got)
	}
	for _, target := range []string{"/v1/items?limit=0", "/v1/items?limit=x", "/v1/items?after=object/account", "/v1/items?replica=stale", "/v1/items?kind=object"} {
		if w := do(t, h, "GET", target, ""); w.Code != 400 {
			t.Errorf("%s: %d %s", target, w.Code, w.Body)
		}
	}
	if w := do(t, h, "GET", "/v1/item?kind=engine&key=object/account", ""); w.Code != 404 {
		t.Errorf("/v1/item without Control: %d", w.Code)
	}
}

// fakeControl explains the entries of a fake backend, with a hostile
// reference.
type fakeControl struct{ b *fakeBackend }

func (c fakeControl) Explain(_ context.Context, k registry.Kind, key string) (reconcile.Explanation, bool) {
	e, ok := c.b.regs.Of(k).Get(key)
	if !ok {
		return reconcile.Explanation{}, false
	}
	return reconcile.Explanation{Entry: e, Remedy: "create object " + hostile,
		References: []reconcile.Reference{{Kind: registry.KindEngine, Type: "object", Name: hostile, Resolved: reconcile.ResolvedMissing}},
		Dependents: []reconcile.Dependent{{Kind: registry.KindEngine, Key: "view/" + hostile}},
		History:    []registry.Transition{{At: time.Now(), State: registry.StatePending, Reason: "not tried yet"}}}, true
}
func (c fakeControl) ExplainKey(ctx context.Context, key string) []reconcile.Explanation {
	var out []reconcile.Explanation
	for _, k := range registry.Kinds {
		if x, ok := c.Explain(ctx, k, key); ok {
			out = append(out, x)
		}
	}
	return out
}
func (c fakeControl) RootCauses() []reconcile.RootCause                 { return []reconcile.RootCause{} }
func (c fakeControl) Retry(context.Context, []registry.Ref, bool) error { return nil }

// The status page links each not-ready entry to its explanation, a page
// that escapes every string from a row.
func TestItemPage(t *testing.T) {
	h0 := pageHandler(t, "", nil)
	b := h0.o.Backend.(*fakeBackend)
	o := h0.o
	o.Control = fakeControl{b}
	h := NewHandler(o)
	page := getPage(h).Body.String()
	if !strings.Contains(page, `<a href="/item?kind=engine&key=flow%2f%3cb%3ef%3c%2fb%3e">`) || !strings.Contains(page, `<a href="/item?kind=connector&key=crm">`) {
		t.Fatalf("no links to the explanations:\n%s", page)
	}
	w := do(t, h, "GET", "/item?kind=engine&key="+url.QueryEscape("flow/<b>f</b>"), "")
	body := w.Body.String()
	if w.Code != 200 || strings.Contains(body, "<script") || strings.Contains(body, "<b>f") || !strings.Contains(body, "missing") ||
		w.Header().Get("Content-Security-Policy") == "" || !strings.Contains(body, "not tried yet") {
		t.Fatalf("item page: %d\n%s", w.Code, body)
	}
	for target, code := range map[string]int{"/item?kind=engine&key=nope": 404, "/item?key=crm": 400, "/item?kind=x&key=crm": 400} {
		if w := do(t, h, "GET", target, ""); w.Code != code {
			t.Errorf("%s: %d, want %d", target, w.Code, code)
		}
	}
	if w := do(t, NewHandler(Options{Backend: b, Token: "tok", Control: fakeControl{b}}), "GET", "/item?kind=connector&key=crm", ""); w.Code != 401 {
		t.Errorf("item page without the token: %d", w.Code)
	}
}
