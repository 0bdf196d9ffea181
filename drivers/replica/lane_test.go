package replica

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
)

// The messages are the platform's own: channel, envelope {n,t,p}, payload
// addresses only.
func TestLaneWireFormat(t *testing.T) {
	now := time.UnixMilli(1764470000123)
	for _, tc := range []struct {
		kind    registry.Kind
		key     string
		deleted bool
		want    []string // channel then message, per lane
	}{
		{registry.KindEngine, "object/account", false, []string{
			"metadata.mutated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","event":{"type":"object","name":"account","state":"active","organizationId":null}}}`}},
		{registry.KindEngine, "org_1:view/all%2Faccounts@crm", true, []string{
			"metadata.mutated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","event":{"type":"view","name":"all/accounts","state":"deleted","organizationId":"org_1"}}}`}},
		{registry.KindEngine, "permission/editor", false, []string{
			"metadata.mutated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","event":{"type":"permission","name":"editor","state":"active","organizationId":null}}}`,
			"authz.invalidated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","epoch":1764470000123,"reason":"permission editor changed","at":1764470000123}}`}},
		{registry.KindDatasource, "crm", false, []string{
			"datasource.mutated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","name":"crm"}}`}},
		{registry.KindCredential, "crm%3Atoken", false, []string{
			"connector-credential.mutated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","ref":"crm:token"}}`}},
		{registry.KindCredential, "sys_secret:sec_01", true, []string{
			"connector-credential.mutated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","ref":"sys_secret:sec_01"}}`}},
		{registry.KindConnector, "crm", false, []string{
			"connector-credential.mutated", `{"n":"reconciler:a","t":1764470000123,"p":{"originNode":"reconciler:a","ref":"crm"}}`}},
	} {
		p, err := registry.ParseKey(tc.kind, tc.key)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.kind, tc.key, err)
		}
		lanes := lanesFor(tc.kind, p, tc.deleted)
		if len(lanes)*2 != len(tc.want) {
			t.Fatalf("%s %s: %d lanes", tc.kind, tc.key, len(lanes))
		}
		for i, l := range lanes {
			msg, err := l.encode("reconciler:a", now)
			if err != nil {
				t.Fatal(err)
			}
			if l.Channel != tc.want[2*i] || string(msg) != tc.want[2*i+1] {
				t.Errorf("%s %s lane %d:\n got %s %s\nwant %s %s", tc.kind, tc.key, i, l.Channel, msg, tc.want[2*i], tc.want[2*i+1])
			}
			o, ok := decodeObserved(l.Channel, msg)
			if !ok || o.Origin != "reconciler:a" || (l.Channel != ChannelAuthz && o.Address != l.Address) {
				t.Errorf("%s %s: observed %+v %v, want address %q", tc.kind, tc.key, o, ok, l.Address)
			}
		}
	}
}

func TestObjectApplied(t *testing.T) {
	row := map[string]any{"name": "t", "fields": map[string]any{"a": map[string]any{"type": "text"}}}
	for _, tc := range []struct {
		name string
		code map[string]any
		ok   bool
	}{
		{"same plus system fields and defaults", map[string]any{"name": "t", "extra": 1.0, "fields": map[string]any{
			"a": map[string]any{"type": "text", "searchable": false}, "id": map[string]any{"type": "text", "system": true}}}, true},
		{"missing field", map[string]any{"name": "t", "fields": map[string]any{}}, false},
		{"removed field still served", map[string]any{"name": "t", "fields": map[string]any{
			"a": map[string]any{"type": "text"}, "b": map[string]any{"type": "text"}}}, false},
		{"changed field", map[string]any{"name": "t", "fields": map[string]any{"a": map[string]any{"type": "number"}}}, false},
		{"not held", nil, false},
	} {
		if ok, why := objectApplied(tc.code, row); ok != tc.ok {
			t.Errorf("%s: applied = %v (%s), want %v", tc.name, ok, why, tc.ok)
		}
	}
}
