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
	"github.com/objectstack-fleet/reconciler/metadata"
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

// Rows whose names mimic another organization's keys each get an entry of
// their own, and deleting the impostors leaves the real entries in place
// (the old key format gave 4 collisions among these 8 rows, and deleting
// the impostors evicted the 4 real entries until a resync).
func TestMimickedKeysNeverCollide(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		conn := `{"provider":"rest","providerConfig":{"baseUrl":"http://127.0.0.1:1"},"auth":{"type":"none"},"enabled":true}`
		obj := `{"fields":{"name":{"type":"text"}}}`
		rows := snapshottest.Impostors
		var fakes []string
		for _, r := range rows {
			body := obj
			if r.Type == "connector" {
				body = conn
			}
			snapshottest.Exec(t, url, snapshottest.InsertImpostor, r.ID, r.Org, r.Type, r.Name, body)
			if r.Fake {
				fakes = append(fakes, r.ID)
			}
		}
		b := start(t, s, url, Options{ResyncInterval: -1})
		// entries counts the connector and engine entries by kind and key.
		entries := func() map[string]int {
			n := map[string]int{}
			for _, e := range b.rec.Registries().List("", "") {
				if e.Kind == registry.KindConnector || e.Kind == registry.KindEngine {
					n[fmt.Sprint(e.Kind, " ", e.Key)]++
				}
			}
			return n
		}
		got := entries()
		if len(got) != len(rows) {
			t.Fatalf("%d rows made %d entries: %v", len(rows), len(got), got)
		}
		b.exec(`DELETE FROM sys_metadata WHERE id IN ('` + strings.Join(fakes, "', '") + `')`)
		b.settle()
		for _, k := range []struct {
			kind registry.Kind
			key  string
		}{
			{registry.KindConnector, registry.NamedKey("acme", "crm", "")},
			{registry.KindEngine, registry.EngineKey("acme", "object", "x", "")},
			{registry.KindEngine, registry.EngineKey("a:b", "object", "y", "")},
			{registry.KindEngine, registry.EngineKey("", "object", "p/q", "")},
		} {
			if _, ok := b.entry(k.kind, k.key); !ok {
				t.Errorf("deleting the impostors evicted %s %s", k.kind, k.key)
			}
		}
		if n := len(entries()); n != 4 {
			t.Errorf("%d entries left after deleting 4 of 8 rows", n)
		}
	})
}

// TestWithheldBodyHeldNamingTheCap: a body the store did not read (above
// its cap) holds the entry naming engine.max_body_bytes and its size, and
// nothing is parsed.
func TestWithheldBodyHeldNamingTheCap(t *testing.T) {
	row := &snapshot.MetadataRow{ID: "o", Type: "object", Name: "huge", State: "active", Revision: 3, Withheld: 64 << 20}
	n := metadataNode(row, metadata.Limits{})
	if n == nil || !strings.Contains(n.fault, "engine.max_body_bytes") || !strings.Contains(n.fault, "64 MiB") {
		t.Fatalf("withheld body: node %+v", n)
	}
	// A store cap below the loop's: still held, saying it was not read.
	n = metadataNode(&snapshot.MetadataRow{ID: "o", Type: "object", Name: "x", State: "active", Withheld: 2048}, metadata.Limits{})
	if n == nil || !strings.Contains(n.fault, "read cap") {
		t.Fatalf("withheld below the loop's cap: node %+v", n)
	}
}
