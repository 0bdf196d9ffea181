package statusapi

import (
	"encoding/json"
	"strings"
	"testing"

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
