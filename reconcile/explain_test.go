package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// On the HotCRM corpus: a hook naming Account (not account) explains the
// missing object; account lists its references, its 19 direct referrers
// and a history starting at its creation; the 63 held items collapse onto
// the missing names that hold them.
func TestExplainCorpus(t *testing.T) {
	t.Parallel()
	eachCorpus(t, func(t *testing.T, s snapshot.Store, url string, _ []corpus.Item) {
		b := start(t, s, url, Options{ResyncInterval: -1})
		ctx := context.Background()

		b.exec(`INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ('hook-draft', 'hook', 'AccountHealthScoreTrigger', 'draft', '{"object":"account"}')`)
		hook, ok := b.rec.Explain(ctx, registry.KindEngine, "hook/AccountHealthScoreTrigger")
		if !ok || hook.State != registry.StateHeld {
			t.Fatalf("hook: %v %+v", ok, hook.Entry)
		}
		var missing []string
		for _, r := range hook.References {
			if r.Resolved == ResolvedMissing {
				missing = append(missing, r.Type+" "+r.Name)
			}
		}
		if len(missing) != 1 || missing[0] != "object Account" {
			t.Errorf("hook's missing references: %q (all: %+v)", missing, hook.References)
		}
		if !strings.Contains(hook.Remedy, "object Account") {
			t.Errorf("hook's remedy: %q", hook.Remedy)
		}
		if hook.Row == nil || hook.Row.ID != "hook-AccountHealthScoreTrigger" || hook.Row.Revision != hook.Revision {
			t.Fatalf("hook's row: %+v (entry revision %d)", hook.Row, hook.Revision)
		}
		if bs := hook.Row.Beside; len(bs) != 1 || bs[0].ID != "hook-draft" || bs[0].State != "draft" {
			t.Errorf("the draft beside the hook: %+v", bs)
		}

		acc, ok := b.rec.Explain(ctx, registry.KindEngine, "object/account")
		if !ok {
			t.Fatal("account: no entry")
		}
		if acc.References == nil {
			t.Error("account: references absent (want present, possibly empty)")
		}
		if len(acc.Dependents) != 19 {
			t.Errorf("account: %d dependents, want 19: %+v", len(acc.Dependents), acc.Dependents)
		}
		for _, d := range acc.Dependents {
			if d.Kind == registry.KindEngine && d.Key == "object/account" {
				t.Error("account lists itself as a dependent")
			}
		}
		if len(acc.History) < 2 || acc.History[0].State != registry.StatePending || acc.History[len(acc.History)-1].State != acc.State {
			t.Errorf("account's history: %+v", acc.History)
		}
		if xs := b.rec.ExplainKey(ctx, "object/account"); len(xs) != 1 || xs[0].Key != "object/account" {
			t.Errorf("ExplainKey: %+v", xs)
		}

		causes := b.rec.RootCauses()
		heldBy := map[string]bool{}
		for _, c := range causes {
			if !strings.HasPrefix(c.Cause, "missing ") {
				t.Errorf("cause %q (want only missing names)", c.Cause)
			}
			for _, h := range c.Held {
				heldBy[h] = true
			}
		}
		if len(heldBy) != 63 {
			t.Errorf("root causes hold %d items, want 63: %+v", len(heldBy), causes)
		}
		if len(causes) == 0 || len(causes) >= 63 {
			t.Errorf("%d root causes (want fewer than the held items): %+v", len(causes), causes)
		}
		t.Logf("63 held items onto %d missing names; most: %s holds %d", len(causes), causes[0].Cause, len(causes[0].Held))
	})
}

// A held connector (refused upstream) heals by Retry alone once the
// upstream accepts; a held entry is not retried otherwise. The history
// shows each transition.
func TestRetryHeld(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		var accept atomic.Bool
		conn := newCounter(func(ctx context.Context, d Desired) error {
			if !accept.Load() {
				return Refused(errors.New("401"), "refused upstream: 401")
			}
			return nil
		})
		b := start(t, s, url, Options{ResyncInterval: -1, Materializers: map[registry.Kind]Materializer{registry.KindConnector: conn}})
		b.exec(`INSERT INTO sys_connector_credential (ref, value) VALUES ('tok', 'x')`)
		b.exec(`INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('c1', 'connector', 'crm', $1)`, connectorBodyJSON("tok"))
		b.settle()
		if e, _ := b.entry(registry.KindConnector, "crm"); e.State != registry.StateHeld || e.Reason != "refused upstream: 401" {
			t.Fatalf("crm: %+v", e)
		}
		calls := conn.count("crm")
		b.settle()
		if conn.count("crm") != calls {
			t.Fatal("a held entry was retried without a change or a request")
		}
		accept.Store(true)
		ctx := context.Background()
		if err := b.rec.Retry(ctx, []registry.Ref{{Kind: registry.KindConnector, Key: "crm"}}, false); err != nil {
			t.Fatal(err)
		}
		x, _ := b.rec.Explain(ctx, registry.KindConnector, "crm")
		if x.State != registry.StateReady || conn.count("crm") != calls+1 {
			t.Fatalf("after retry: %+v, %d calls (want %d)", x.Entry, conn.count("crm"), calls+1)
		}
		var states []registry.State
		for _, h := range x.History {
			states = append(states, h.State)
		}
		if len(states) != 3 || states[0] != registry.StatePending || states[1] != registry.StateHeld || states[2] != registry.StateReady {
			t.Errorf("history: %+v", x.History)
		}
		if len(x.References) != 1 || x.References[0].Kind != registry.KindCredential || x.References[0].Resolved != ResolvedOrgLess {
			t.Errorf("references: %+v", x.References)
		}
		// retry --held: every held entry, none other.
		accept.Store(false)
		b.exec(`UPDATE sys_metadata SET metadata = $1 WHERE id = 'c1'`, strings.Replace(connectorBodyJSON("tok"), `"enabled"`, `"x":1,"enabled"`, 1))
		b.settle()
		accept.Store(true)
		if err := b.rec.Retry(ctx, nil, true); err != nil {
			t.Fatal(err)
		}
		if st := b.state(registry.KindConnector, "crm"); st != registry.StateReady {
			t.Fatalf("after retry --held: %s", st)
		}
	})
}

// revalInstance is an instance whose checks fail with fail's error.
type revalInstance struct {
	fail   *atomic.Pointer[error]
	checks *atomic.Int64
}

func (i revalInstance) Close() error { return nil }

func (i revalInstance) Revalidate(context.Context) error {
	i.checks.Add(1)
	if p := i.fail.Load(); p != nil {
		return *p
	}
	return nil
}

// A ready connector whose upstream starts refusing turns held with no row
// change; one whose upstream fails transiently turns degraded and is
// materialized again by its backoff.
func TestRevalidate(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		var fail atomic.Pointer[error]
		var checks, builds atomic.Int64
		mat := MaterializerFunc(func(ctx context.Context, d Desired) (registry.Instance, error) {
			builds.Add(1)
			if p := fail.Load(); p != nil {
				return nil, *p
			}
			return revalInstance{&fail, &checks}, nil
		})
		b := start(t, s, url, Options{ResyncInterval: -1, RevalidateInterval: 50 * time.Millisecond, RetryBase: 50 * time.Millisecond,
			Materializers: map[registry.Kind]Materializer{registry.KindConnector: mat}})
		b.exec(`INSERT INTO sys_connector_credential (ref, value) VALUES ('tok', 'x')`)
		b.exec(`INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('c1', 'connector', 'crm', $1)`, connectorBodyJSON("tok"))
		b.waitFor("crm ready and checked", func() bool {
			return b.state(registry.KindConnector, "crm") == registry.StateReady && checks.Load() > 1
		})
		refused := Refused(errors.New("401"), "refused upstream: 401")
		fail.Store(&refused)
		b.waitFor("crm held by a check", func() bool { return b.state(registry.KindConnector, "crm") == registry.StateHeld })
		e, _ := b.entry(registry.KindConnector, "crm")
		if e.Reason != "revalidation: refused upstream: 401" || e.ServingRevision == 0 {
			t.Errorf("after a refused check: %q, serving %d", e.Reason, e.ServingRevision)
		}
		n := builds.Load()
		fail.Store(nil)
		if err := b.rec.Retry(context.Background(), []registry.Ref{{Kind: registry.KindConnector, Key: "crm"}}, false); err != nil {
			t.Fatal(err)
		}
		if st := b.state(registry.KindConnector, "crm"); st != registry.StateReady || builds.Load() != n+1 {
			t.Fatalf("after retry: %s, %d builds (want %d)", st, builds.Load(), n+1)
		}
		transient := Transient(errors.New("503"), "upstream answered 503")
		fail.Store(&transient)
		b.waitFor("crm degraded by a check", func() bool { return b.state(registry.KindConnector, "crm") == registry.StateDegraded })
		fail.Store(nil)
		b.waitFor("crm ready again by its backoff", func() bool { return b.state(registry.KindConnector, "crm") == registry.StateReady })
	})
}
