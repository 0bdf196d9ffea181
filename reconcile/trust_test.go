package reconcile

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/ossecret"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// upsertOrgRow writes a sys_metadata row of an organization ("" for NULL):
// $1 id, $2 type, $3 name, $4 org, $5 body.
const upsertOrgRow = `INSERT INTO sys_metadata (id, type, name, organization_id, state, metadata) VALUES ($1, $2, $3, $4, 'active', $5)
ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata`

// upsertOrgSecret writes a sys_secret row of an organization: $1 id,
// $2 org (nil: NULL), $3 namespace, $4 key, $5 ciphertext.
const upsertOrgSecret = `INSERT INTO sys_secret (id, organization_id, namespace, key, kms_key_id, alg, version, ciphertext)
VALUES ($1, $2, $3, $4, 'local:v1', 'aes-256-gcm', 1, $5)
ON CONFLICT (id) DO UPDATE SET ciphertext = excluded.ciphertext`

// seen records the secret each materialization was given, per key.
type seen struct {
	mu  sync.Mutex
	got map[string]string
}

func (s *seen) record(_ context.Context, d Desired) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := d.Secret.Reveal(); v != "" {
		s.got[d.Key] = v
	}
	return nil
}

func (s *seen) of(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[key]
}

// TestCredentialsServeTheirOrganization: a connector credential ref is
// bound to the organization of the first row naming it, recorded in the
// store, kept across the owner's edits and a restart; another
// organization's rows naming it (directly or by borrowing a connector) are
// held naming the rule and never given the value, while environment-wide
// rows may use any ref; a sys_secret serves only its own datasource.
func TestCredentialsServeTheirOrganization(t *testing.T) {
	t.Parallel()
	const keyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	key, err := ossecret.ParseKey(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		const canary = "CANARY-trust-5a1e"
		x := func(q string, args ...any) { snapshottest.Exec(t, url, q, args...) }
		x(upsertCred, "acme-token", canary+"-acme")
		x(upsertCred, "platform-token", canary+"-platform")
		sealed, err := ossecret.Encrypt(key, "datasource", "acme_db", canary+"-secret")
		if err != nil {
			t.Fatal(err)
		}
		x(upsertOrgSecret, sealed.ID, "acme", "datasource", "acme_db", sealed.Ciphertext)
		ds := func(name, external string) string {
			return `{"name":"` + name + `","driver":"postgres","config":{"host":"db"},"external":` + external + `,"active":true}`
		}
		x(upsertOrgRow, "c-acme", "connector", "crm", "acme", connectorBodyJSON("acme-token"))
		x(upsertOrgRow, "c-plat", "connector", "platform_api", "", connectorBodyJSON("platform-token"))
		x(upsertOrgRow, "d-acme", "datasource", "acme_db", "acme", ds("acme_db", `{"credentialsRef":"sys_secret:`+sealed.ID+`"}`))

		got := &seen{got: map[string]string{}}
		mats := func() map[registry.Kind]Materializer {
			return map[registry.Kind]Materializer{registry.KindConnector: newCounter(got.record), registry.KindDatasource: newCounter(got.record)}
		}
		b := start(t, s, url, Options{ResyncInterval: -1, Secrets: keyOpener{key}, Materializers: mats()})
		for _, k := range []registry.Ref{{Kind: registry.KindConnector, Key: "acme:crm"}, {Kind: registry.KindConnector, Key: "platform_api"},
			{Kind: registry.KindDatasource, Key: "acme:acme_db"}} {
			if st := b.state(k.Kind, k.Key); st != registry.StateReady {
				t.Fatalf("owner's %s: %s, want ready", k, st)
			}
		}
		owners, err := s.CredentialOwners(context.Background())
		if err != nil || owners["acme-token"] != "acme" || owners["platform-token"] != "" || len(owners) != 2 {
			t.Fatalf("recorded owners = %v, %v", owners, err)
		}

		// The attacks: another organization names acme's ref, the
		// platform's ref, acme's secret, and borrows the platform's
		// connector.
		x(upsertOrgRow, "e-1", "connector", "steal", "evil", connectorBodyJSON("acme-token"))
		x(upsertOrgRow, "e-2", "connector", "grab", "evil", connectorBodyJSON("platform-token"))
		x(upsertOrgRow, "e-3", "datasource", "acme_db", "evil", ds("acme_db", `{"credentialsRef":"sys_secret:`+sealed.ID+`"}`))
		x(upsertOrgRow, "e-4", "datasource", "borrow", "evil", ds("borrow", `{"connector":"platform_api"}`))
		// acme's own datasource under another name may not use the secret
		// either; the environment-wide scope may use acme's ref.
		x(upsertOrgRow, "d-acme2", "datasource", "other_db", "acme", ds("other_db", `{"credentialsRef":"sys_secret:`+sealed.ID+`"}`))
		x(upsertOrgRow, "c-plat2", "connector", "admin_crm", "", connectorBodyJSON("acme-token"))
		x(upsertOrgRow, "d-plat", "datasource", "plat_db", "", ds("plat_db", `{"connector":"platform_api"}`))
		b.settle()
		held := map[registry.Ref]string{
			{Kind: registry.KindConnector, Key: "evil:steal"}:     "credential acme-token is bound to another organization",
			{Kind: registry.KindConnector, Key: "evil:grab"}:      "credential platform-token is bound to another organization",
			{Kind: registry.KindDatasource, Key: "evil:acme_db"}:  "credential sys_secret:" + sealed.ID + " does not serve this entry",
			{Kind: registry.KindDatasource, Key: "evil:borrow"}:   "credential platform-token is bound to another organization",
			{Kind: registry.KindDatasource, Key: "acme:other_db"}: "does not serve this entry",
		}
		check := func(when string) {
			t.Helper()
			for ref, why := range held {
				e, _ := b.entry(ref.Kind, ref.Key)
				if e.State != registry.StateHeld || !strings.Contains(e.Reason, why) {
					t.Fatalf("%s: %s: %s %q, want held naming %q", when, ref, e.State, e.Reason, why)
				}
				if strings.Contains(e.Reason, canary) || strings.Contains(e.Reason, "acme:") {
					t.Fatalf("%s: %s: the reason tells too much: %q", when, ref, e.Reason)
				}
				if v := got.of(ref.Key); v != "" {
					t.Fatalf("%s: %s was given a credential (%d bytes)", when, ref, len(v))
				}
			}
			for _, ref := range []registry.Ref{{Kind: registry.KindConnector, Key: "acme:crm"}, {Kind: registry.KindConnector, Key: "admin_crm"},
				{Kind: registry.KindDatasource, Key: "plat_db"}, {Kind: registry.KindDatasource, Key: "acme:acme_db"}} {
				if st := b.state(ref.Kind, ref.Key); st != registry.StateReady {
					t.Fatalf("%s: %s: %s, want ready", when, ref, st)
				}
			}
			if got.of("acme:crm") != canary+"-acme" || got.of("admin_crm") != canary+"-acme" || got.of("plat_db") != canary+"-platform" ||
				got.of("acme:acme_db") != canary+"-secret" {
				t.Fatalf("%s: the owners' entries lost their credentials", when)
			}
		}
		check("delta")

		// The owner edits its row (a newer revision than the attacker's):
		// the binding stays, also for a sidecar started afresh.
		edited, _ := json.Marshal(map[string]any{"provider": "rest", "providerConfig": map[string]any{"baseUrl": "http://127.0.0.1:2"},
			"auth": map[string]any{"type": "bearer", "credentialRef": "acme-token"}, "enabled": true})
		x(upsertOrgRow, "c-acme", "connector", "crm", "acme", string(edited))
		b.settle()
		check("after the owner's edit")
		b.stop()
		got = &seen{got: map[string]string{}}
		b = start(t, s, url, Options{ResyncInterval: -1, Secrets: keyOpener{key}, Materializers: mats()})
		check("restarted")

		// When no row of the owner names the ref any more, it goes to the
		// first row naming it.
		x(`DELETE FROM sys_metadata WHERE id = $1`, "c-acme")
		b.settle()
		if st := b.state(registry.KindConnector, "evil:steal"); st != registry.StateReady {
			t.Fatalf("evil:steal after acme's row went: %s, want ready (the ref is free)", st)
		}
		if owners, _ := s.CredentialOwners(context.Background()); owners["acme-token"] != "evil" {
			t.Fatalf("owner after acme's row went: %q", owners["acme-token"])
		}
	})
}

// TestNullAndEmptyShareAKey: rows whose organization or package is NULL
// beside ” key alike; deleting the row that won the key keeps the entry
// (another row still claims it) and its referrers stay ready.
func TestNullAndEmptyShareAKey(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		const ins = `INSERT INTO sys_metadata (id, type, name, organization_id, package_id, state, metadata) VALUES ($1, 'object', 'account', $2, $3, 'active', $4)`
		x := func(q string, args ...any) { snapshottest.Exec(t, url, q, args...) }
		x(ins, "k1", nil, nil, `{"fields":{"a":{"type":"text"}}}`)
		x(ins, "k2", "", nil, `{"fields":{"b":{"type":"text"}}}`)
		x(upsertMeta, "v1", "view", "acct_view", "active", `{"object":"account"}`)
		b := start(t, s, url, Options{ResyncInterval: -1})
		x(ins, "k3", nil, "", `{"fields":{"c":{"type":"text"}}}`) // the newest: it wins the key
		b.settle()
		if e, ok := b.entry(registry.KindEngine, "object/account"); !ok || e.State != registry.StateReady {
			t.Fatalf("object/account: %+v", e)
		}
		x(`DELETE FROM sys_metadata WHERE id = 'k3'`)
		b.settle()
		for _, key := range []string{"object/account", "view/acct_view"} {
			if e, ok := b.entry(registry.KindEngine, key); !ok || e.State != registry.StateReady {
				t.Fatalf("after deleting the winner, %s: %v %s %q; want ready (k1, k2 still claim the key)", key, ok, e.State, e.Reason)
			}
		}
		x(`DELETE FROM sys_metadata WHERE id IN ('k1', 'k2')`)
		b.settle()
		if _, ok := b.entry(registry.KindEngine, "object/account"); ok {
			t.Fatal("object/account still there after its last row went")
		}
	})
}
