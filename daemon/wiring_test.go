package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The caps in the configuration reach the materializers: a connector
// whose upstream answers more than connector.max_spec_bytes is held naming
// that key and the configured size.
func TestConfiguredCapsReachMaterializers(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"openapi":"3.0.3","x":"` + strings.Repeat("x", 4096) + `"}`))
	}))
	defer up.Close()
	cfg := testConfig(t, "connector:\n  max_spec_bytes: 2048\nengine:\n  max_body_bytes: 4096\n")
	b := `{"provider":"openapi","providerConfig":{"baseUrl":"` + up.URL + `","specUrl":"/openapi.json"},"auth":{"type":"none"},"enabled":true}`
	d := reconcile.Desired{Kind: registry.KindConnector, Key: "crm", Revision: 1, Body: json.RawMessage(b),
		Metadata: &snapshot.MetadataRow{ID: "m1", Type: "connector", Name: "crm", State: "active", Metadata: json.RawMessage(b), Revision: 1}}
	inst, err := materializers(cfg, slog.New(slog.DiscardHandler))[registry.KindConnector].Materialize(context.Background(), d)
	if err == nil {
		inst.Close()
		t.Fatal("a 4 KiB answer passed a 2 KiB cap")
	}
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || !strings.HasSuffix(reason, "answer is above the 2 KiB cap (connector.max_spec_bytes)") {
		t.Fatalf("got %v %q", class, reason)
	}
	// engine.max_body_bytes caps a connector's body too.
	big := `{"provider":"rest","providerConfig":{"baseUrl":"` + up.URL + `","notes":"` + strings.Repeat("x", 8192) + `"},"auth":{"type":"none"},"enabled":true}`
	d.Body, d.Metadata.Metadata = json.RawMessage(big), json.RawMessage(big)
	inst, err = materializers(cfg, slog.New(slog.DiscardHandler))[registry.KindConnector].Materialize(context.Background(), d)
	if err == nil {
		inst.Close()
		t.Fatal("an 8 KiB body passed a 4 KiB cap")
	}
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || !strings.Contains(reason, "cap (engine.max_body_bytes)") {
		t.Fatalf("got %v %q", class, reason)
	}
}
