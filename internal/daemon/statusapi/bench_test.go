package statusapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
)

// BenchmarkItems100k serves /v1/items over 100k entries (90k objects,
// 10k views, one in ten held, a few organizations and packages): the whole
// list, a page of 100, a filtered page of 100 and a page deep in the list.
// A page costs what it shows and skips, not the whole list: compare
// ns/op of whole-list with the pages (the docs state the ratio).
func BenchmarkItems100k(b *testing.B) {
	const n = 100_000
	back := &fakeBackend{regs: registry.NewSet(), synced: make(chan struct{})}
	reg := back.regs.Of(registry.KindEngine)
	now := time.Now()
	for i := range n {
		typ := "object"
		if i%10 == 9 {
			typ = "view"
		}
		org, pkg := "", ""
		if i%4 == 1 {
			org = fmt.Sprintf("org_%d", i%7)
		}
		if i%5 == 2 {
			pkg = "crm"
		}
		e := registry.Entry{Key: registry.EngineKey(org, typ, fmt.Sprintf("item%06d", i), pkg), Revision: int64(i + 1),
			Signature: "0123456789abcdef0123456789abcdef", State: registry.StateReady, Since: now, ServingRevision: int64(i + 1)}
		if i%10 == 3 {
			e.State, e.Reason, e.ServingRevision = registry.StateHeld, "references missing object Account", 0
		}
		reg.Put(e)
	}
	h := NewHandler(Options{Backend: back})
	get := func(b *testing.B, target string) {
		for b.Loop() {
			r := httptest.NewRequest(http.MethodGet, target, nil)
			r.Host = "127.0.0.1:9477"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Fatalf("%s: %d %s", target, w.Code, w.Body)
			}
			b.ReportMetric(float64(w.Body.Len()), "body-bytes")
		}
	}
	get(b, "/v1/items?limit=1") // sorts the keys once, as the first page after a change does
	b.Run("whole-list", func(b *testing.B) { get(b, "/v1/items") })
	b.Run("whole-list-filtered", func(b *testing.B) { get(b, "/v1/items?type=object&state=held") })
	b.Run("page-100", func(b *testing.B) { get(b, "/v1/items?limit=100") })
	b.Run("page-100-filtered", func(b *testing.B) { get(b, "/v1/items?type=object&state=held&org=-&limit=100") })
	b.Run("page-100-deep", func(b *testing.B) {
		get(b, "/v1/items?limit=100&after=engine/"+registry.EngineKey("", "object", "item090000", ""))
	})
	b.Run("page-100-after-a-create", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			reg.Put(registry.Entry{Key: fmt.Sprintf("object/new%07d", i), State: registry.StatePending})
			r := httptest.NewRequest(http.MethodGet, "/v1/items?limit=100", nil)
			r.Host = "127.0.0.1:9477"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
		}
	})
}
