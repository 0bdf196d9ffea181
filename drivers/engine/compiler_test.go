package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/engine"
	"github.com/objectstack-fleet/reconciler/internal/canonjson"
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

func TestCompileShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		typ        string
		body       string
		wantReason string // "" = compiles
		objects    []string
		datasource string
	}{
		{"object", "object", `{"datasource":"crm","fields":[{"name":"a","type":"text"},{"name":"o","type":"lookup","reference":"users"},{"name":"p","type":"lookup","reference":"account"},{"name":"q","type":"lookup","reference":"users"}]}`, "", []string{"users", "account"}, "crm"},
		{"object without fields", "object", `{"label":"x"}`, "", nil, ""},
		{"object null datasource", "object", `{"datasource":null,"fields":[]}`, "", nil, ""},
		{"object fields not array", "object", `{"fields":{"name":"a"}}`, "fields must be an array", nil, ""},
		{"object field not object", "object", `{"fields":["a"]}`, "fields[0] must be a JSON object", nil, ""},
		{"object field missing name", "object", `{"fields":[{"type":"text"}]}`, "fields[0].name is required", nil, ""},
		{"object field name number", "object", `{"fields":[{"name":1,"type":"text"}]}`, "fields[0].name must be a string", nil, ""},
		{"object field missing type", "object", `{"fields":[{"name":"a","type":"text"},{"name":"b"}]}`, "fields[1].type is required", nil, ""},
		{"object field reference number", "object", `{"fields":[{"name":"a","type":"lookup","reference":3}]}`, "fields[0].reference must be a string", nil, ""},
		{"object field reference empty", "object", `{"fields":[{"name":"a","type":"lookup","reference":""}]}`, "fields[0].reference must not be empty", nil, ""},
		{"object duplicate field", "object", `{"fields":[{"name":"a","type":"text"},{"name":"a","type":"text"}]}`, `fields[1].name "a" repeats fields[0]`, nil, ""},
		{"object datasource number", "object", `{"datasource":5}`, "datasource must be a string", nil, ""},
		{"view", "view", `{"object":"account","columns":["name"]}`, "", []string{"account"}, ""},
		{"view missing object", "view", `{}`, "object is required", nil, ""},
		{"view object array", "view", `{"object":["a"]}`, "object must be a string", nil, ""},
		{"flow", "flow", `{"trigger":{"object":"Account","on":"create"}}`, "", []string{"Account"}, ""},
		{"flow missing trigger", "flow", `{"steps":[]}`, "trigger is required", nil, ""},
		{"flow trigger string", "flow", `{"trigger":"account"}`, "trigger must be a JSON object", nil, ""},
		{"flow trigger missing object", "flow", `{"trigger":{}}`, "trigger.object is required", nil, ""},
		{"permission", "permission", `{"object":"account","allow":["read"]}`, "", []string{"account"}, ""},
		{"permission object bool", "permission", `{"object":true}`, "object must be a string", nil, ""},
		{"other type", "dashboard", `{"widgets":[1,2]}`, "", nil, ""},
		{"other type array", "dashboard", `[1,2]`, "body must be a JSON object", nil, ""},
		{"not json", "view", `{"object":`, "body is not valid JSON", nil, ""},
		{"empty", "page", ``, "body must be a JSON object", nil, ""},
	}
	c := engine.New(engine.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, err := c.Materialize(context.Background(), desired(tt.typ, "n", tt.body, ""))
			objs, ds, rerr := engine.References(tt.typ, json.RawMessage(tt.body))
			if tt.wantReason != "" {
				class, reason := reconcile.Classify(err)
				if err == nil || class != reconcile.ClassInvalid || !startsWith(reason, tt.wantReason) {
					t.Fatalf("Materialize = %v (class %v), want invalid %q", err, class, tt.wantReason)
				}
				if !errors.Is(err, engine.ErrShape) {
					t.Errorf("error %v is not ErrShape", err)
				}
				if rerr == nil || rerr.Error() != err.Error() {
					t.Errorf("References error = %v, want %v", rerr, err)
				}
				return
			}
			if err != nil || rerr != nil {
				t.Fatalf("Materialize = %v, References = %v", err, rerr)
			}
			it := inst.(*engine.Item)
			if it.Type != tt.typ || it.Name != "n" || !slices.Equal(it.Objects, tt.objects) || it.Datasource != tt.datasource {
				t.Errorf("item = %+v, want objects %v datasource %q", it, tt.objects, tt.datasource)
			}
			if !slices.Equal(objs, tt.objects) || ds != tt.datasource {
				t.Errorf("References = %v %q, want %v %q", objs, ds, tt.objects, tt.datasource)
			}
			if err := inst.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

func TestChecksum(t *testing.T) {
	t.Parallel()
	body := `{ "object": "account", "columns": ["name", "owner"] }`
	sum, err := canonjson.Checksum([]byte(body))
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
			if class != reconcile.ClassInvalid || reason != "checksum mismatch" || !errors.Is(err, engine.ErrChecksum) {
				t.Fatalf("Materialize = %v (%v %q), want invalid checksum mismatch", err, class, reason)
			}
		})
	}
}

func TestMaterializeUsesKeyWithoutRow(t *testing.T) {
	t.Parallel()
	d := reconcile.Desired{Kind: registry.KindEngine, Key: "acme:view/all", Body: json.RawMessage(`{"object":"account"}`),
		Refs: []registry.Ref{{Kind: registry.KindEngine, Key: "acme:object/account"}}}
	inst, err := engine.New(engine.Options{}).Materialize(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	it := inst.(*engine.Item)
	if it.Type != "view" || it.Name != "all" || len(it.Refs) != 1 {
		t.Fatalf("item = %+v", it)
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

type hotcrmItem struct {
	Type     string          `json:"type"`
	Name     string          `json:"name"`
	Metadata json.RawMessage `json:"metadata"`
}

func loadHotCRM(t testing.TB) []hotcrmItem {
	t.Helper()
	b, err := os.ReadFile("testdata/hotcrm-metadata.json")
	if err != nil {
		t.Fatalf("read hotcrm fixture: %v", err)
	}
	var doc struct {
		Items []hotcrmItem `json:"items"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Items
}

// Every hotcrm item compiles, and its references are what the body says
// (names case-sensitive: a flow on "Account" does not name "account").
func TestHotCRM(t *testing.T) {
	t.Parallel()
	items := loadHotCRM(t)
	c := engine.New(engine.Options{})
	objects := map[string]bool{}
	counts := map[string]int{}
	for _, it := range items {
		counts[it.Type]++
		if it.Type == "object" {
			objects[it.Name] = true
		}
	}
	if counts["object"] != 65 {
		t.Fatalf("fixture has %d objects, want 65", counts["object"])
	}
	dangling := 0
	for _, it := range items {
		sum, err := canonjson.Checksum(it.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := c.Materialize(context.Background(), desired(it.Type, it.Name, string(it.Metadata), sum))
		if err != nil {
			t.Errorf("%s/%s: %v", it.Type, it.Name, err)
			continue
		}
		for _, o := range inst.(*engine.Item).Objects {
			if !objects[o] {
				dangling++
			}
		}
	}
	objs, _, err := engine.References("flow", json.RawMessage(`{"trigger":{"object":"Account"}}`))
	if err != nil || !slices.Equal(objs, []string{"Account"}) || objects["Account"] {
		t.Errorf("flow on Account: %v %v", objs, err)
	}
	t.Logf("%d items (%v), %d dangling references", len(items), counts, dangling)
}

func FuzzDecode(f *testing.F) {
	for _, s := range []struct{ typ, body string }{
		{"object", `{"datasource":"crm","fields":[{"name":"a","type":"lookup","reference":"b"}]}`},
		{"object", `{"fields":[{"name":"a"},{}]}`},
		{"view", `{"object":"account"}`},
		{"flow", `{"trigger":{"object":"Account"}}`},
		{"flow", `{"trigger":null}`},
		{"permission", `{"object":1}`},
		{"dashboard", `[]`},
		{"object", `{"fields":[{"name":"\u0000","type":"x","reference":"\ud800"}]}`},
		{"view", `{"object":"a"} trailing`},
	} {
		f.Add(s.typ, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		it, err := engine.Compile(typ, "n", body)
		objs, ds, rerr := engine.References(typ, body)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Compile err %v, References err %v", err, rerr)
		}
		if err != nil {
			if class, _ := reconcile.Classify(err); class != reconcile.ClassInvalid {
				t.Fatalf("class %v for %v", class, err)
			}
			return
		}
		if !slices.Equal(it.Objects, objs) || it.Datasource != ds {
			t.Fatalf("Compile and References disagree")
		}
		seen := map[string]bool{}
		for _, o := range objs {
			if o == "" || seen[o] {
				t.Fatalf("bad references %q", objs)
			}
			seen[o] = true
		}
		_ = engine.VerifyChecksum(body, "sha256:00")
	})
}
