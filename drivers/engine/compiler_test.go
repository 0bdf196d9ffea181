package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/engine"
	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func desired(typ, name, body, checksum string) reconcile.Desired {
	return reconcile.Desired{
		Kind: registry.KindEngine, Key: typ + "/" + name, Revision: 7,
		Body: json.RawMessage(body),
		Metadata: &snapshot.MetadataRow{
			ID: "id-" + name, Type: typ, Name: name, State: "active",
			Metadata: json.RawMessage(body), Checksum: checksum, Revision: 7,
		},
	}
}

func objectRefs(names ...string) []metadata.Reference {
	var out []metadata.Reference
	for _, n := range names {
		out = append(out, metadata.Reference{Kind: metadata.RefObject, Name: n})
	}
	return out
}

// The compiler holds what metadata refuses, as invalid, with metadata's
// reason; the rules themselves are tested in package metadata.
func TestMaterializeShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		typ        string
		body       string
		wantReason string // "" = compiles
		refs       []metadata.Reference
		fields     int
		datasource string
	}{
		{"object", "object", `{"name":"t","datasource":"crm","fields":{"a":{"type":"text"},"o":{"type":"lookup","reference":"users"},"p":{"type":"lookup","reference":"account"}}}`, "",
			append([]metadata.Reference{{Kind: metadata.RefDatasource, Name: "crm"}}, objectRefs("account", "users")...), 3, "crm"},
		{"object fields array", "object", `{"fields":[{"name":"a","type":"text"}]}`, "fields must be a JSON object", nil, 0, ""},
		{"object field no type", "object", `{"fields":{"a":{}}}`, "fields.a.type is required", nil, 0, ""},
		{"view", "view", `{"object":"account","list":{"data":{"provider":"object","object":"account"}}}`, "", objectRefs("account"), 0, ""},
		{"hook", "hook", `{"object":"Account"}`, "", objectRefs("Account"), 0, ""},
		{"hook without object", "hook", `{"name":"h"}`, "object is required", nil, 0, ""},
		{"permission", "permission", `{"objects":{"task":{}},"fields":{"lead.x":{}}}`, "", objectRefs("lead", "task"), 0, ""},
		{"flow", "flow", `{"nodes":[{"id":"s","type":"start","config":{"objectName":"task"}}]}`, "", objectRefs("task"), 0, ""},
		{"other type", "dashboard", `{"widgets":[1,2]}`, "", nil, 0, ""},
		{"array body", "dashboard", `[1,2]`, "metadata is not a JSON object", nil, 0, ""},
		{"not json", "view", `{"object":`, "metadata is not valid JSON", nil, 0, ""},
	}
	c := engine.New(engine.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, err := c.Materialize(context.Background(), desired(tt.typ, "n", tt.body, ""))
			if tt.wantReason != "" {
				class, reason := reconcile.Classify(err)
				if err == nil || class != reconcile.ClassInvalid || !strings.HasPrefix(reason, tt.wantReason) {
					t.Fatalf("Materialize = %v (class %v), want invalid %q", err, class, tt.wantReason)
				}
				var f *metadata.Fault
				if !errors.Is(err, metadata.ErrInvalid) || !errors.As(err, &f) {
					t.Errorf("error %v is not a metadata fault", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Materialize: %v", err)
			}
			it := inst.(*engine.Item)
			if it.Type != tt.typ || it.Name != "n" || !slices.Equal(it.Refs, tt.refs) ||
				len(it.Fields) != tt.fields || it.Datasource != tt.datasource || it.Bytes != len(tt.body) {
				t.Errorf("item = %+v, want refs %v, %d fields, datasource %q", it, tt.refs, tt.fields, tt.datasource)
			}
			if err := inst.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestMaterializeLimits(t *testing.T) {
	t.Parallel()
	c := engine.New(engine.Options{Limits: metadata.Limits{MaxBodyBytes: 64, MaxRefs: 1}})
	_, err := c.Materialize(context.Background(), desired("object", "o", `{"label":"`+strings.Repeat("x", 100)+`"}`, ""))
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || !errors.Is(err, metadata.ErrLimit) ||
		!strings.Contains(reason, "engine.max_body_bytes") {
		t.Fatalf("Materialize = %v (%v %q)", err, class, reason)
	}
	_, err = c.Materialize(context.Background(), desired("hook", "h", `{"object":["a","b"]}`, ""))
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || !errors.Is(err, metadata.ErrLimit) ||
		!strings.Contains(reason, "engine.max_refs") {
		t.Fatalf("Materialize = %v (%v %q)", err, class, reason)
	}
}

func TestChecksum(t *testing.T) {
	t.Parallel()
	body := `{ "object": "account", "columns": ["name", "owner"] }`
	sum, err := metadata.Checksum([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	c := engine.New(engine.Options{})
	tests := []struct {
		name     string
		body     string
		checksum string
		wantErr  bool
	}{
		{"matches", body, sum, false},
		{"matches reordered", `{"columns":["name","owner"],"object":"account"}`, sum, false},
		{"absent", body, "", false},
		{"body changed", `{"object":"account","columns":["name"]}`, sum, true},
		{"garbage", body, "md5:abc", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Materialize(context.Background(), desired("view", "v", tt.body, tt.checksum))
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Materialize: %v", err)
				}
				return
			}
			class, reason := reconcile.Classify(err)
			if class != reconcile.ClassInvalid || !strings.HasPrefix(reason, "checksum mismatch (stored ") || !errors.Is(err, metadata.ErrChecksum) ||
				!strings.Contains(reason, "`reconciler checksum --row id-v`") || !strings.Contains(reason, "NULL") || !strings.Contains(reason, "revision 7") {
				t.Fatalf("Materialize = %v (%v %q), want invalid checksum mismatch", err, class, reason)
			}
			if verr := engine.VerifyChecksum(json.RawMessage(tt.body), tt.checksum); verr == nil || !strings.HasPrefix(verr.Error(), "checksum mismatch (stored ") {
				t.Errorf("VerifyChecksum = %v", verr)
			}
		})
	}
}

func TestMaterializeUsesKeyWithoutRow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ key, typ, name string }{
		{"acme:view/all", "view", "all"},
		{"view/all", "view", "all"},
		{"org%3A1:view/all%40x@crm", "view", "all@x"},
	} {
		d := reconcile.Desired{Kind: registry.KindEngine, Key: tt.key, Body: json.RawMessage(`{"object":"account"}`),
			Refs: []registry.Ref{{Kind: registry.KindEngine, Key: "acme:object/account"}}}
		inst, err := engine.New(engine.Options{}).Materialize(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		it := inst.(*engine.Item)
		if it.Type != tt.typ || it.Name != tt.name || len(it.Resolved) != 1 || !slices.Equal(it.Refs, objectRefs("account")) {
			t.Fatalf("%s: item = %+v", tt.key, it)
		}
	}
}

func TestMaterializeHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := engine.New(engine.Options{}).Materialize(ctx, desired("view", "v", `{"object":"a"}`, ""))
	if class, _ := reconcile.Classify(err); err == nil || class != reconcile.ClassTransient {
		t.Fatalf("Materialize = %v, want transient", err)
	}
}

// Every HotCRM item compiles with its checksum verified.
func TestCorpus(t *testing.T) {
	t.Parallel()
	items, err := corpus.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := engine.New(engine.Options{})
	fields := 0
	for _, it := range items {
		sum, err := metadata.Checksum(it.Body)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := c.Materialize(context.Background(), desired(it.Type, it.Name, string(it.Body), sum))
		if err != nil {
			t.Errorf("%s/%s: %v", it.Type, it.Name, err)
			continue
		}
		fields += len(inst.(*engine.Item).Fields)
	}
	if fields != 1643 {
		t.Errorf("%d fields compiled, want 1643", fields)
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []struct{ typ, body string }{
		{"object", `{"datasource":"crm","fields":{"a":{"type":"lookup","reference":"b"}}}`},
		{"object", `{"fields":{"a":{},"b":1}}`},
		{"view", `{"object":"account","listViews":{"x":{"data":{"object":"y"}}}}`},
		{"hook", `{"object":["Account",""]}`},
		{"flow", `{"nodes":[{"type":"loop","config":{"body":{"nodes":[{"config":{"objectName":"x"}}]}}}]}`},
		{"permission", `{"objects":{"a":{}},"fields":{"b":{}}}`},
		{"dashboard", `[]`},
		{"object", `{"fields":{"\u0000":{"type":"x","reference":"\ud800"}}}`},
		{"view", `{"object":"a"} trailing`},
	} {
		f.Add(s.typ, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		it, err := engine.Compile(typ, "n", body)
		md, merr := metadata.Parse(typ, "n", body, metadata.Limits{})
		if (err == nil) != (merr == nil) {
			t.Fatalf("Compile err %v, Parse err %v", err, merr)
		}
		if err != nil {
			if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || reason != merr.Error() {
				t.Fatalf("class %v reason %q for %v", class, reason, merr)
			}
			return
		}
		if !slices.Equal(it.Refs, md.Refs) {
			t.Fatalf("Compile and Parse disagree")
		}
		for i, r := range it.Refs {
			if r.Name == "" || (i > 0 && !refLess(it.Refs[i-1], r)) {
				t.Fatalf("refs not unique and sorted: %v", it.Refs)
			}
		}
		_ = engine.VerifyChecksum(body, "sha256:00")
	})
}

func refLess(a, b metadata.Reference) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.Name < b.Name
}

// Materialize compiles d.Body, the one body a Desired carries; the row
// says the type, name and checksum only (a row without its text, as a
// library caller may pass, changes nothing).
func TestMaterializeReadsBody(t *testing.T) {
	t.Parallel()
	body := json.RawMessage(`{"object":"account"}`)
	for _, rowText := range []json.RawMessage{nil, json.RawMessage(`not the body`)} {
		d := reconcile.Desired{Kind: registry.KindEngine, Key: "view/all", Revision: 1, Body: body,
			Metadata: &snapshot.MetadataRow{ID: "v1", Type: "view", Name: "all", State: "active", Metadata: rowText}}
		inst, err := engine.New(engine.Options{}).Materialize(context.Background(), d)
		if err != nil {
			t.Fatalf("row text %q: %v", rowText, err)
		}
		if it := inst.(*engine.Item); it.Bytes != len(body) || !slices.Equal(it.Refs, objectRefs("account")) {
			t.Fatalf("row text %q: compiled %d bytes, refs %v", rowText, it.Bytes, it.Refs)
		}
	}
}
