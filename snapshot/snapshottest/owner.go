package snapshottest

import (
	"sync"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// testCredentialOwners: a ref's first binding wins (also between
// concurrent binders), an unbind by another organization leaves it, and
// an unbind by its owner frees it for the next binder.
func testCredentialOwners(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		if got, err := s.BindCredential(ctx, "crm-token", "acme"); err != nil || got != "acme" {
			t.Fatalf("first bind = %q, %v", got, err)
		}
		if got, err := s.BindCredential(ctx, "crm-token", "evil"); err != nil || got != "acme" {
			t.Fatalf("second bind = %q, %v; want the first owner", got, err)
		}
		if got, err := s.BindCredential(ctx, "platform-token", ""); err != nil || got != "" {
			t.Fatalf("env-wide bind = %q, %v", got, err)
		}
		if err := s.UnbindCredential(ctx, "crm-token", "evil"); err != nil {
			t.Fatal(err)
		}
		owners, err := s.CredentialOwners(ctx)
		if err != nil || len(owners) != 2 || owners["crm-token"] != "acme" || owners["platform-token"] != "" {
			t.Fatalf("owners = %v, %v", owners, err)
		}
		if err := s.UnbindCredential(ctx, "crm-token", "acme"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.BindCredential(ctx, "crm-token", "evil"); err != nil || got != "evil" {
			t.Fatalf("bind after the owner's unbind = %q, %v", got, err)
		}

		// Concurrent binders all get the one owner recorded.
		var wg sync.WaitGroup
		got := make([]string, 8)
		errs := make([]error, 8)
		for i := range got {
			wg.Go(func() { got[i], errs[i] = s.BindCredential(ctx, "race", string(rune('a'+i))) })
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil || got[i] != got[0] {
				t.Fatalf("concurrent binds = %q, %v", got, errs)
			}
		}
	})
}

// testBadHeartbeatRowKeepsTheFleet: a heartbeat row whose counts hold a
// member that is not an integer (anyone who can write the table can write
// one) is listed with its valid counts; the fleet's listing never fails.
func testBadHeartbeatRowKeepsTheFleet(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		if _, err := s.Heartbeat(ctx, snapshot.Heartbeat{ReplicaID: "good", Counts: map[string]int64{"engine/ready": 3}}); err != nil {
			t.Fatal(err)
		}
		Exec(t, url, `INSERT INTO sys_reconciler_replica (replica_id, counts) VALUES ('bad', '{"engine/held": 99999999999, "x": "str", "y": [1]}')`)
		got, err := s.Heartbeats(ctx)
		if err != nil || len(got) != 2 {
			t.Fatalf("replicas = %+v, %v", got, err)
		}
		if got[0].ReplicaID != "bad" || got[0].Counts["engine/held"] != 99999999999 || len(got[0].Counts) != 1 || got[1].Counts["engine/ready"] != 3 {
			t.Fatalf("replicas = %+v", got)
		}
	})
}
