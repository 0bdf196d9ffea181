package metadata_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/metadata"
)

func refs(spec ...string) []metadata.Reference {
	var out []metadata.Reference
	for _, s := range spec {
		kind, name, _ := strings.Cut(s, " ")
		out = append(out, metadata.Reference{Kind: metadata.RefKind(kind), Name: name})
	}
	return out
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		typ   string
		body  string
		fault string   // "" = parses
		refs  []string // "kind name", in the order Parse gives them
	}{
		// objects
		{"object", "object", `{"name":"task","datasource":"crm","fields":{"subject":{"type":"text"},"owner":{"type":"lookup","reference":"users"},"account":{"type":"master_detail","reference":"account"},"again":{"type":"lookup","reference":"users"},"parent":{"type":"tree","reference":"task"}}}`, "",
			[]string{"datasource crm", "object account", "object task", "object users"}},
		{"object default datasource", "object", `{"datasource":"default","fields":{}}`, "", nil},
		{"object no fields", "object", `{"label":"x"}`, "", nil},
		{"object null members", "object", `{"datasource":null,"fields":null}`, "", nil},
		{"object lookup without reference", "object", `{"fields":{"who_id":{"type":"lookup"},"b":{"type":"lookup","reference":"  "}}}`, "", nil},
		{"object reference on text ignored", "object", `{"fields":{"a":{"type":"text","reference":"x"}}}`, "", nil},
		{"object summary", "object", `{"fields":{"n":{"type":"summary","summaryOperations":{"object":"line","field":"x","function":"sum"}}}}`, "", []string{"object line"}},
		{"object list view", "object", `{"fields":{},"listViews":{"all":{"data":{"provider":"object","object":"task"}}}}`, "", []string{"object task"}},
		{"object fields array", "object", `{"fields":[{"name":"a","type":"text"}]}`, "fields must be a JSON object, not an array", nil},
		{"object field not object", "object", `{"fields":{"a":"text"}}`, "fields.a must be a JSON object, not a string", nil},
		{"object field no type", "object", `{"fields":{"a":{"label":"A"}}}`, "fields.a.type is required", nil},
		{"object field type number", "object", `{"fields":{"a":{"type":3}}}`, "fields.a.type must be a string, not a number", nil},
		{"object reference number", "object", `{"fields":{"a":{"type":"lookup","reference":3}}}`, "fields.a.reference must be a string, not a number", nil},
		{"object odd field key", "object", `{"fields":{"a.b\u001b":{"type":4}}}`, `fields["a.b\x1b"].type must be a string, not a number`, nil},
		{"object datasource number", "object", `{"datasource":5}`, "datasource must be a string, not a number", nil},
		// views
		{"view", "view", `{"name":"all","object":"account","list":{"type":"grid","data":{"provider":"object","object":"account"}}}`, "", []string{"object account"}},
		{"view containers", "view", `{"form":{"data":{"object":"a"}},"listViews":{"x":{"data":{"provider":"object","object":"b"}}},"formViews":{"y":{"data":{"object":"c"}}}}`, "", []string{"object a", "object b", "object c"}},
		{"view item config", "view", `{"name":"lead.pipeline","object":"lead","viewKind":"list","config":{"data":{"provider":"object","object":"lead"}}}`, "", []string{"object lead"}},
		{"view flat", "view", `{"object":"x","viewKind":"list","data":{"provider":"object","object":"y"}}`, "", []string{"object x", "object y"}},
		{"view api provider", "view", `{"list":{"data":{"provider":"api","read":{"url":"/x"}}}}`, "", nil},
		{"view no object", "view", `{"list":{"type":"grid"}}`, "", nil},
		{"view object array", "view", `{"object":["a"]}`, "object must be a string, not an array", nil},
		{"view list string", "view", `{"list":"grid"}`, "list must be a JSON object, not a string", nil},
		{"view data object number", "view", `{"listViews":{"x":{"data":{"object":1}}}}`, "listViews.x.data.object must be a string, not a number", nil},
		// hooks
		{"hook", "hook", `{"name":"AccountHealthScoreTrigger","object":"Account"}`, "", []string{"object Account"}},
		{"hook array", "hook", `{"object":["b","a","b"]}`, "", []string{"object a", "object b"}},
		{"hook wildcard", "hook", `{"object":"*"}`, "", nil},
		{"hook no object", "hook", `{"name":"x"}`, "object is required", nil},
		{"hook empty object", "hook", `{"object":" "}`, "object must name at least one object", nil},
		{"hook empty array", "hook", `{"object":[]}`, "object must name at least one object", nil},
		{"hook array number", "hook", `{"object":["a",1]}`, "object[1] must be a string, not a number", nil},
		{"hook object number", "hook", `{"object":1}`, "object must be a string or an array of strings, not a number", nil},
		// permissions
		{"permission", "permission", `{"name":"editor","objects":{"task":{"allowRead":true},"*":{"allowRead":true}},"fields":{"task.priority":{"readable":true},"lead.x":{}}}`, "", []string{"object lead", "object task"}},
		{"permission objects array", "permission", `{"objects":["task"]}`, "objects must be a JSON object, not an array", nil},
		{"permission field key", "permission", `{"objects":{},"fields":{"priority":{}}}`, `fields.priority must be named "object.field"`, nil},
		// flows
		{"flow", "flow", `{"name":"f","type":"record_change","nodes":[{"id":"start","type":"start","config":{"objectName":"task","triggerType":"record-after-create"}},{"id":"g","type":"get_record","config":{"objectName":"account"}},{"id":"u","type":"update_record","config":{"object":"lead"}},{"id":"t","type":"create_record","config":{"objectName":"{target}"}},{"id":"e","type":"end"}],"edges":[]}`, "",
			[]string{"object account", "object lead", "object task"}},
		{"flow regions", "flow", `{"nodes":[{"id":"l","type":"loop","config":{"body":{"nodes":[{"id":"d","type":"delete_record","config":{"objectName":"x"}}],"edges":[]}}},{"id":"p","type":"parallel","config":{"branches":[{"nodes":[{"id":"s","type":"screen","config":{"objectName":"y"}}]},"junk"]}}]}`, "",
			[]string{"object x", "object y"}},
		{"flow nodes object", "flow", `{"nodes":{"a":1}}`, "nodes must be an array, not an object", nil},
		{"flow node string", "flow", `{"nodes":["start"]}`, "nodes[0] must be a JSON object, not a string", nil},
		{"flow config array", "flow", `{"nodes":[{"type":"start","config":[]}]}`, "nodes[0].config must be a JSON object, not an array", nil},
		{"flow objectName number", "flow", `{"nodes":[{"type":"start","config":{"objectName":7}}]}`, "nodes[0].config.objectName must be a string, not a number", nil},
		// others
		{"dataset", "dataset", `{"name":"d","object":"opportunity"}`, "", []string{"object opportunity"}},
		{"report", "report", `{"dataset":"d1","blocks":[{"dataset":"d2"},{"dataset":"d1"}]}`, "", []string{"dataset d1", "dataset d2"}},
		{"action", "action", `{"name":"a","objectName":"task"}`, "", []string{"object task"}},
		{"page", "page", `{"name":"p","object":"task"}`, "", []string{"object task"}},
		{"dashboard", "dashboard", `{"widgets":[1,2]}`, "", nil},
		{"other array", "dashboard", `[1,2]`, "metadata is not a JSON object", nil},
		{"string", "view", `"view"`, "metadata is not a JSON object", nil},
		{"empty", "page", ``, "metadata is not a JSON object", nil},
		{"not json", "view", `{"object":`, "metadata is not valid JSON", nil},
		{"trailing", "view", `{"object":"a"} x`, "metadata is not valid JSON", nil},
		// connectors and datasources
		{"connector bearer", "connector", `{"provider":"rest","auth":{"type":"bearer","credentialRef":"crm-token"}}`, "", []string{"credential crm-token"}},
		{"connector none", "connector", `{"provider":"rest","auth":{"type":"none","credentialRef":"x"}}`, "", nil},
		{"connector no auth", "connector", `{"provider":"rest"}`, "", nil},
		{"connector unknown auth", "connector", `{"auth":{"type":"oauth2"}}`, `auth.type is "oauth2", not one of bearer, api-key, basic or none`, nil},
		{"connector no ref", "connector", `{"auth":{"type":"basic"}}`, "auth.credentialRef is required for auth type basic", nil},
		{"connector enabled string", "connector", `{"enabled":"no"}`, "enabled must be true or false, not a string", nil},
		{"datasource secret", "datasource", `{"name":"wh","driver":"postgres","config":{"host":"h"},"external":{"allowWrites":false,"credentialsRef":"sys_secret:sec_1","connector":"crm"},"active":true,"origin":"runtime"}`, "",
			[]string{"credential sys_secret:sec_1"}},
		{"datasource borrows", "datasource", `{"driver":"postgres","external":{"connector":"crm"}}`, "", []string{"connector crm"}},
		{"datasource plain", "datasource", `{"driver":"sqlite","config":{"path":"x.db"}}`, "", nil},
		{"datasource external string", "datasource", `{"external":"x"}`, "external must be a JSON object, not a string", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			it, err := metadata.Parse(tt.typ, "n", []byte(tt.body), metadata.Limits{})
			if tt.fault != "" {
				var f *metadata.Fault
				if !errors.As(err, &f) || !errors.Is(err, metadata.ErrInvalid) || !strings.HasPrefix(err.Error(), tt.fault) {
					t.Fatalf("Parse = %v, want fault %q", err, tt.fault)
				}
				if errors.Is(err, metadata.ErrLimit) || errors.Is(err, metadata.ErrChecksum) {
					t.Errorf("shape fault %v is a limit or checksum fault", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if want := refs(tt.refs...); !slices.Equal(it.Refs, want) {
				t.Errorf("Refs = %v, want %v", it.Refs, want)
			}
			if it.Type != tt.typ || it.Name != "n" || !it.Desired {
				t.Errorf("item = %+v", it)
			}
		})
	}
}

func TestParseTypedParts(t *testing.T) {
	t.Parallel()
	it, err := metadata.Parse("object", "task", []byte(`{"datasource":"crm","fields":{"z":{"type":"text"},"a":{"type":"lookup","reference":"users"},"m":{"type":"number"},"z":{"type":"date"}}}`), metadata.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []metadata.Field{{Name: "z", Type: "date"}, {Name: "a", Type: "lookup", Reference: "users"}, {Name: "m", Type: "number"}}
	if it.Object == nil || !slices.Equal(it.Object.Fields, want) || it.Object.Datasource != "crm" {
		t.Fatalf("Object = %+v, want fields %v (body order, a repeated key keeps its place and takes its last value)", it.Object, want)
	}

	it, err = metadata.Parse("connector", "crm", []byte(`{"enabled":false,"auth":{"type":"api-key","credentialRef":"k"}}`), metadata.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Desired || *it.Connector != (metadata.Connector{Enabled: false, AuthType: "api-key", CredentialRef: "k"}) || it.Credential() != "k" {
		t.Fatalf("connector = %+v %+v", it, it.Connector)
	}

	it, err = metadata.Parse("datasource", "wh", []byte(`{"driver":"postgres","active":false,"external":{"connector":"crm"}}`), metadata.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Desired || *it.Datasource != (metadata.Datasource{Driver: "postgres", Connector: "crm"}) || it.Credential() != "" {
		t.Fatalf("datasource = %+v %+v", it, it.Datasource)
	}
	if id, ok := metadata.SecretID("sys_secret:sec_9"); !ok || id != "sec_9" {
		t.Errorf("SecretID = %q %v", id, ok)
	}
	for _, ref := range []string{"crm-token", "sys_secret:", ""} {
		if _, ok := metadata.SecretID(ref); ok {
			t.Errorf("SecretID(%q) names a sys_secret row", ref)
		}
	}
}

// Refs do not depend on the order of members in the stored text.
func TestParseRefsOrderIndependent(t *testing.T) {
	t.Parallel()
	a, err := metadata.Parse("permission", "p", []byte(`{"objects":{"b":{},"a":{}},"fields":{"c.x":{}}}`), metadata.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := metadata.Parse("permission", "p", []byte(`{"fields":{"c.x":{}},"objects":{"a":{},"b":{}}}`), metadata.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Refs, b.Refs) {
		t.Fatalf("%v != %v", a.Refs, b.Refs)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	big := `{"label":"` + strings.Repeat("x", 2_200_000) + `"}`
	_, err := metadata.Parse("object", "o", []byte(big), metadata.Limits{})
	if !errors.Is(err, metadata.ErrLimit) || !errors.Is(err, metadata.ErrInvalid) ||
		err.Error() != "body is 2.1 MiB, above the 1 MiB cap (engine.max_body_bytes)" {
		t.Fatalf("Parse = %v", err)
	}
	_, err = metadata.Parse("object", "o", []byte(`{"label":"abc"}`), metadata.Limits{MaxBodyBytes: 10})
	if err == nil || err.Error() != "body is 15 bytes, above the 10 bytes cap (engine.max_body_bytes)" {
		t.Fatalf("Parse = %v", err)
	}
	_, err = metadata.Parse("object", "o", []byte(`{"label":"`+strings.Repeat("x", 1500)+`"}`), metadata.Limits{MaxBodyBytes: 1510})
	if err == nil || err.Error() != "body is 1512 bytes, above the 1510 bytes cap (engine.max_body_bytes)" {
		t.Fatalf("Parse = %v", err)
	}

	var b strings.Builder
	b.WriteString(`{"object":[`)
	for i := range 11 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"o%d","o%d"`, i, i)
	}
	b.WriteString(`]}`)
	_, err = metadata.Parse("hook", "h", []byte(b.String()), metadata.Limits{MaxRefs: 10})
	if !errors.Is(err, metadata.ErrLimit) || err.Error() != "item has 11 references, above the 10 cap (engine.max_refs)" {
		t.Fatalf("Parse = %v", err)
	}
	if _, err := metadata.Parse("hook", "h", []byte(b.String()), metadata.Limits{MaxRefs: 11}); err != nil {
		t.Fatalf("Parse at the cap: %v", err)
	}
}

func TestVerifyChecksum(t *testing.T) {
	t.Parallel()
	body := []byte(`{ "object": "account", "columns": ["name", "owner"] }`)
	sum, err := metadata.Checksum(body)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, body, sum string
		ok              bool
	}{
		{"matches", string(body), sum, true},
		{"reordered", `{"columns":["name","owner"],"object":"account"}`, sum, true},
		{"null checksum", string(body), "", true},
		{"changed", `{"object":"account"}`, sum, false},
		{"garbage", string(body), "md5:abc", false},
		{"not json", `{`, sum, false},
	}
	for _, tt := range tests {
		err := metadata.VerifyChecksum([]byte(tt.body), tt.sum)
		if tt.ok != (err == nil) {
			t.Errorf("%s: VerifyChecksum = %v", tt.name, err)
		}
		if !tt.ok && (!errors.Is(err, metadata.ErrChecksum) || !errors.Is(err, metadata.ErrInvalid) || !strings.HasPrefix(err.Error(), "checksum mismatch (stored ")) {
			t.Errorf("%s: error %v is not a checksum mismatch", tt.name, err)
		}
	}
}

// The platform's own checksums verify, the key-order cases included.
func TestVerifyPlatformChecksums(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../internal/hashspec/testdata/checksums.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []struct{ Name, Body, Checksum string }
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Vectors) < 30 {
		t.Fatalf("%d vectors", len(doc.Vectors))
	}
	for _, v := range doc.Vectors {
		if err := metadata.VerifyChecksum([]byte(v.Body), v.Checksum); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
	// JavaScript puts "9" before "10"; a byte-order sort would not.
	if err := metadata.VerifyChecksum([]byte(`{"10":1,"9":2}`), "sha256:"+sha256hex(`{"9":2,"10":1}`)); err != nil {
		t.Error(err)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestIsCodeObject(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		want bool
	}{{"sys_user", true}, {"sys_", true}, {"users", true}, {"Users", false}, {"account", false}, {"xsys_user", false}} {
		if got := metadata.IsCodeObject(tt.name, []string{"users"}); got != tt.want {
			t.Errorf("IsCodeObject(%q) = %v", tt.name, got)
		}
	}
}

// A fault quotes at most a short excerpt of a long or hostile key.
func TestFaultQuotesShortly(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("é", 5000) + "\x1b[31m"
	_, err := metadata.Parse("object", "o", []byte(`{"fields":{"`+key+`":1}}`), metadata.Limits{})
	if err == nil || len(err.Error()) > 200 || strings.ContainsRune(err.Error(), 0x1b) {
		t.Fatalf("Parse = %q", err)
	}
}

func TestDescribeMissing(t *testing.T) {
	t.Parallel()
	many := make([]metadata.Reference, 40_000)
	for i := range many {
		many[i] = metadata.Reference{Kind: metadata.RefObject, Name: fmt.Sprintf("o%d", i)}
	}
	long := metadata.Reference{Kind: metadata.RefObject, Name: strings.Repeat("x", 100_000)}
	for _, tt := range []struct {
		refs []metadata.Reference
		want string
	}{
		{refs("object account"), "references missing object account"},
		{refs("object Account", "object users"), "references missing object Account and object users"},
		{refs("datasource crm", "object a", "object b"), "references missing datasource crm, object a and object b"},
		{many, "references missing object o0, object o1, object o2, object o3, object o4 and 39995 more"},
	} {
		if got := metadata.DescribeMissing(tt.refs); got != tt.want {
			t.Errorf("DescribeMissing = %q, want %q", got, tt.want)
		}
	}
	if got := metadata.DescribeMissing([]metadata.Reference{long}); len(got) > 200 {
		t.Errorf("DescribeMissing of a long name is %d bytes", len(got))
	}
}
