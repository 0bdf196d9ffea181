package reconcile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// hookBody is a hook body naming n objects (o0 … o<n-1>).
func hookBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"object":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"o%d"`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// An item with 40,000 references (the attack wrote 670 KB log lines and
// drift files) is held naming engine.max_refs; one with 9,000 missing
// references, under the cap, is held with a reason naming five of them.
// Whatever their size, every log line, reason and the drift report stay
// short.
func TestHugeReferenceItemsStayShort(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		logs := proctest.NewBuffer()
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('h1','hook','wide',$1), ('h2','hook','missing',$2)`,
			hookBody(40_000), hookBody(9_000))
		b := start(t, s, url, Options{ResyncInterval: -1,
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		for key, want := range map[string]string{
			"hook/wide":    "item has 40000 references, above the 10000 cap (engine.max_refs)",
			"hook/missing": "references missing object o0, object o1, object o10, object o100, object o1000 and 8995 more",
		} {
			e, ok := b.entry(registry.KindEngine, key)
			if !ok || e.State != registry.StateHeld || e.Reason != want {
				t.Errorf("%s: %s %q, want held %q", key, e.State, e.Reason, want)
			}
		}
		rep, err := b.rec.Drift(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if len(js) > 4<<10 {
			t.Errorf("drift report of two items is %d bytes", len(js))
		}
		b.stop()
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		sc.Buffer(nil, 16<<20)
		longest := 0
		for sc.Scan() {
			longest = max(longest, len(sc.Text()))
		}
		if longest > 2<<10 {
			t.Errorf("longest log line is %d bytes", longest)
		}
	})
}
