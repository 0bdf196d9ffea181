package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/ossecret"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// keyOpener opens sys_secret rows with one platform key, as the daemon's
// opener does.
type keyOpener struct{ key ossecret.Key }

func (o keyOpener) Open(row snapshot.SecretRow) (secret.Secret, error) {
	v, err := ossecret.Decrypt(o.key, ossecret.Sealed{ID: row.ID, Namespace: row.Namespace, Key: row.Key,
		KMSKeyID: row.KMSKeyID, Alg: row.Alg, Ciphertext: row.Ciphertext.Reveal()})
	var oe *ossecret.Error
	if errors.As(err, &oe) {
		return secret.Secret{}, oe.Kind
	}
	return secret.New(v), err
}

// TestSecrets: datasources take their password from sys_secret rows
// decrypted as the platform does; a secret change re-materializes exactly
// the datasources naming it; a secret this reconciler cannot decrypt holds
// them, naming the secret and never its bytes.
func TestSecrets(t *testing.T) {
	t.Parallel()
	const keyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	key, err := ossecret.ParseKey(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	seal := func(name, plain string) ossecret.Sealed {
		s, err := ossecret.Encrypt(key, "datasource", name, plain)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		const canary = "CANARY-secret-7c1d"
		wh, crm := seal("wh", canary+"-wh"), seal("crm", canary+"-crm")
		for _, sec := range []struct {
			name string
			s    ossecret.Sealed
		}{{"wh", wh}, {"crm", crm}} {
			snapshottest.Exec(t, url, snapshottest.UpsertSecret, sec.s.ID, "datasource", sec.name, sec.s.Ciphertext)
			body, _ := json.Marshal(map[string]any{"name": sec.name, "driver": "postgres", "config": map[string]any{"host": "db", "database": sec.name},
				"external": map[string]any{"credentialsRef": "sys_secret:" + sec.s.ID}, "active": true, "origin": "runtime"})
			snapshottest.Exec(t, url, upsertDS, sec.name, string(body))
		}
		var mu sync.Mutex
		got := map[string]string{}
		ds := newCounter(func(_ context.Context, d Desired) error {
			mu.Lock()
			got[d.Key] = d.Secret.Reveal()
			mu.Unlock()
			return nil
		})
		pw := func(k string) string { mu.Lock(); defer mu.Unlock(); return got[k] }
		b := start(t, s, url, Options{ResyncInterval: -1, Secrets: keyOpener{key},
			Materializers: map[registry.Kind]Materializer{registry.KindDatasource: ds}})
		if pw("wh") != canary+"-wh" || pw("crm") != canary+"-crm" {
			t.Fatalf("passwords given to the datasources are wrong (lengths %d, %d)", len(pw("wh")), len(pw("crm")))
		}
		if st := b.state(registry.KindCredential, registry.SecretKey(wh.ID)); st != registry.StateReady {
			t.Fatalf("secret entry: %s", st)
		}

		// Rotate wh's secret: only wh is re-materialized.
		ds.reset()
		rotated := seal("wh", canary+"-wh2")
		snapshottest.Exec(t, url, snapshottest.UpsertSecret, wh.ID, "datasource", "wh", rotated.Ciphertext)
		b.settle()
		if ds.count("wh") != 1 || ds.count("crm") != 0 || pw("wh") != canary+"-wh2" {
			t.Fatalf("after rotating wh's secret: wh %d, crm %d materializations", ds.count("wh"), ds.count("crm"))
		}

		// A value sealed under another key holds the secret and wh, naming it.
		other, _ := ossecret.ParseKey(strings.Repeat("ab", 32))
		foreign, _ := ossecret.Encrypt(other, "datasource", "wh", canary)
		snapshottest.Exec(t, url, snapshottest.UpsertSecret, wh.ID, "datasource", "wh", foreign.Ciphertext)
		b.settle()
		for _, ref := range []registry.Ref{{Kind: registry.KindCredential, Key: registry.SecretKey(wh.ID)}, {Kind: registry.KindDatasource, Key: "wh"}} {
			e, _ := b.entry(ref.Kind, ref.Key)
			if e.State != registry.StateHeld || !strings.Contains(e.Reason, "secret "+wh.ID+" cannot be decrypted") {
				t.Fatalf("%s: %s %q, want held naming the secret", ref, e.State, e.Reason)
			}
		}
		if st := b.state(registry.KindDatasource, "crm"); st != registry.StateReady {
			t.Fatalf("crm: %s, want ready (only wh's secret changed)", st)
		}
		// A ciphertext above the cap is not even read: held naming it.
		snapshottest.Exec(t, url, snapshottest.UpsertSecret, wh.ID, "datasource", "wh", strings.Repeat("QUFB", 40_000))
		b.settle()
		if e, _ := b.entry(registry.KindCredential, registry.SecretKey(wh.ID)); e.State != registry.StateHeld ||
			!strings.Contains(e.Reason, "its ciphertext is 160000 bytes, above the 64 KiB cap") {
			t.Fatalf("a 160 KB ciphertext: %s %q", e.State, e.Reason)
		}
		for _, e := range b.rec.Registries().List("", "") {
			if strings.Contains(e.Reason, canary) || strings.Contains(e.Reason, foreign.Ciphertext) {
				t.Fatalf("a reason carries secret bytes: %q", e.Reason)
			}
		}
	})
}
