package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/ossecret"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
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
	mats, err := materializers(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := mats[registry.KindConnector].Materialize(context.Background(), d)
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
	inst, err = mats[registry.KindConnector].Materialize(context.Background(), d)
	if err == nil {
		inst.Close()
		t.Fatal("an 8 KiB body passed a 4 KiB cap")
	}
	if class, reason := reconcile.Classify(err); class != reconcile.ClassInvalid || !strings.Contains(reason, "cap (engine.max_body_bytes)") {
		t.Fatalf("got %v %q", class, reason)
	}
}

// TestSecretOpener: the daemon decrypts sys_secret rows with the key the
// variable secrets.key_env names; without the key, with another key and
// under an external KMS it says why (naming the variable, never a byte of
// the secret or the key); a value that is not a key refuses to start.
func TestSecretOpener(t *testing.T) {
	const keyEnv = "TEST_OS_SECRET_KEY"
	keyHex := strings.Repeat("0f", 32)
	otherHex := strings.Repeat("ab", 32)
	key, err := ossecret.ParseKey(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	const canary = "CANARY-pw-51d2"
	sealed, err := ossecret.Encrypt(key, "datasource", "wh", canary)
	if err != nil {
		t.Fatal(err)
	}
	row := func(kms string) snapshot.SecretRow {
		return snapshot.SecretRow{ID: sealed.ID, Namespace: "datasource", Key: "wh", KMSKeyID: kms, Alg: sealed.Alg,
			Ciphertext: secret.New(sealed.Ciphertext)}
	}
	cfg := testConfig(t, "secrets:\n  key_env: "+keyEnv+"\n")
	opener := func(env string) (*secretOpener, error) {
		d := New(Options{Config: cfg, Getenv: func(k string) string {
			if k == keyEnv {
				return env
			}
			return ""
		}})
		return d.newSecretOpener(cfg)
	}
	for _, tc := range []struct {
		name, env, kms, want string
	}{
		{"the key", keyHex, sealed.KMSKeyID, ""},
		{"no key", "", sealed.KMSKeyID, "no secret key (environment variable " + keyEnv + " is not set)"},
		{"another key", otherHex, sealed.KMSKeyID, "does not decrypt with the configured key"},
		{"external KMS", keyHex, "aws-kms:arn:aws:kms:eu-west-1:1:key/x", "external KMS"},
	} {
		o, err := opener(tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		v, err := o.Open(row(tc.kms))
		if tc.want == "" {
			if err != nil || v.Reveal() != canary {
				t.Errorf("%s: Open = %d bytes, %v; want the plaintext", tc.name, len(v.Reveal()), err)
			}
			continue
		}
		if err == nil || !v.IsEmpty() || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open = %d bytes, %v; want an error saying %q", tc.name, len(v.Reveal()), err, tc.want)
			continue
		}
		msg := fmt.Sprintf("%v %+v %#v", err, err, o)
		for _, b := range []string{canary, sealed.Ciphertext, keyHex, otherHex} {
			if strings.Contains(msg, b) {
				t.Errorf("%s: the error or the opener prints secret bytes: %s", tc.name, msg)
			}
		}
	}
	if _, err := opener("not-a-key"); err == nil || !strings.Contains(err.Error(), "secrets.key_env: environment variable "+keyEnv) {
		t.Fatalf("a variable that is not a key: %v", err)
	}
}

// TestHostPolicyWired: connector rows naming the status address, the
// store's and the bus's host:port, a link-local address or a host of
// connector.deny_hosts are held naming the key; a loopback upstream of the
// demo's kind stays allowed.
func TestHostPolicyWired(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer up.Close()
	cfg := testConfig(t, "connector:\n  deny_hosts: [\"10.1.2.0/24\"]\n")
	cfg.StoreURL, cfg.StatusListen, cfg.ReplicaBusURL = "postgres://u@127.0.0.1:5999/x", "127.0.0.1:9998", "redis://127.0.0.1:6390"
	mats, err := materializers(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for base, want := range map[string]string{
		"http://127.0.0.1:9998/v1/drift": "(connector.deny_hosts)",
		"http://localhost:9998/v1/items": "(connector.deny_hosts)",
		"http://127.0.0.1:5999/":         "(connector.deny_hosts)",
		"http://127.0.0.1:6390/":         "(connector.deny_hosts)",
		"http://169.254.169.254/latest":  "(connector.deny_hosts)",
		"http://10.1.2.3:80/":            "(connector.deny_hosts)",
		up.URL:                           "",
	} {
		b := `{"provider":"rest","providerConfig":{"baseUrl":"` + base + `"},"auth":{"type":"none"},"enabled":true}`
		d := reconcile.Desired{Kind: registry.KindConnector, Key: "c", Revision: 1, Body: json.RawMessage(b)}
		inst, err := mats[registry.KindConnector].Materialize(context.Background(), d)
		reason := ""
		if err == nil {
			inst.Close()
		} else {
			_, reason = reconcile.Classify(err)
		}
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(reason, want)) {
			t.Errorf("%s: %v, want %q", base, err, want)
		}
	}
}
