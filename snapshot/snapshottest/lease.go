package snapshottest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// testLease is the lease's contract on both stores: one holder at a time,
// renewals and releases only with the holder's token, and a dead holder's
// lease taken over once it expires.
func testLease(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, _ string) {
		ctx := Ctx(t)
		if _, ok, now, err := s.ReadLease(ctx, "repair"); err != nil || ok || now.IsZero() {
			t.Fatalf("read a lease never taken: ok %v now %v err %v", ok, now, err)
		}
		a, err := s.AcquireLease(ctx, "repair", "a", time.Minute)
		if err != nil || a.Holder != "a" || a.Token < 1 || !a.ExpiresAt.After(a.AcquiredAt) {
			t.Fatalf("acquire: %+v, %v", a, err)
		}
		// The holder takes it again: extended, same token.
		again, err := s.AcquireLease(ctx, "repair", "a", 2*time.Minute)
		if err != nil || again.Token != a.Token || !again.ExpiresAt.After(a.ExpiresAt) || !again.AcquiredAt.Equal(a.AcquiredAt) {
			t.Fatalf("re-acquire by its holder: %+v (first %+v), %v", again, a, err)
		}
		// Another holder is refused, naming the holder.
		_, err = s.AcquireLease(ctx, "repair", "b", time.Minute)
		var held *snapshot.LeaseHeldError
		if !errors.As(err, &held) || held.Lease.Holder != "a" || held.Lease.Token != a.Token {
			t.Fatalf("acquire of a held lease: %v", err)
		}
		// Another lease name is another lease.
		if _, err := s.AcquireLease(ctx, "restart", "b", time.Minute); err != nil {
			t.Fatalf("acquire another lease: %v", err)
		}
		renewed, err := s.RenewLease(ctx, again, 3*time.Minute)
		if err != nil || !renewed.ExpiresAt.After(again.ExpiresAt) || renewed.Token != a.Token {
			t.Fatalf("renew: %+v, %v", renewed, err)
		}
		got, ok, now, err := s.ReadLease(ctx, "repair")
		if err != nil || !ok || got.Holder != "a" || !got.Held(now) || !got.ExpiresAt.Equal(renewed.ExpiresAt) {
			t.Fatalf("read: %+v ok %v now %v, %v", got, ok, now, err)
		}
		if err := s.ReleaseLease(ctx, renewed); err != nil {
			t.Fatal(err)
		}
		if got, _, now, _ := s.ReadLease(ctx, "repair"); got.Held(now) {
			t.Fatalf("released lease still held: %+v at %v", got, now)
		}
		if _, err := s.RenewLease(ctx, renewed, time.Minute); !errors.Is(err, snapshot.ErrLeaseLost) {
			t.Fatalf("renew of a released lease: %v", err)
		}
		b, err := s.AcquireLease(ctx, "repair", "b", time.Minute)
		if err != nil || b.Token <= a.Token {
			t.Fatalf("acquire after release: %+v (first token %d), %v", b, a.Token, err)
		}
		// The old holder's stale token neither renews nor releases it.
		if _, err := s.RenewLease(ctx, renewed, time.Minute); !errors.Is(err, snapshot.ErrLeaseLost) {
			t.Fatalf("renew with a stale token: %v", err)
		}
		if err := s.ReleaseLease(ctx, snapshot.Lease{Name: "repair", Holder: "a", Token: a.Token}); err != nil {
			t.Fatal(err)
		}
		if got, _, now, _ := s.ReadLease(ctx, "repair"); got.Holder != "b" || !got.Held(now) {
			t.Fatalf("a stale release ended b's lease: %+v", got)
		}
		if err := s.ReleaseLease(ctx, b); err != nil {
			t.Fatal(err)
		}

		// A dead holder: it takes the lease briefly and never renews; the
		// next one gets it once it expired, with a new token.
		dead, err := s.AcquireLease(ctx, "repair", "dead", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		var next snapshot.Lease
		waitFor(t, "the dead holder's lease expires", func() (bool, error) {
			l, err := s.AcquireLease(ctx, "repair", "c", time.Minute)
			if errors.As(err, &held) {
				if held.Lease.Holder != "dead" {
					t.Fatalf("held by %q, want dead", held.Lease.Holder)
				}
				return false, nil
			}
			next = l
			return err == nil, err
		})
		if next.Token <= dead.Token || next.Holder != "c" {
			t.Fatalf("after expiry: %+v (dead %+v)", next, dead)
		}
		if _, err := s.RenewLease(ctx, dead, time.Minute); !errors.Is(err, snapshot.ErrLeaseLost) {
			t.Fatalf("renew by the dead holder after takeover: %v", err)
		}
		if err := s.ReleaseLease(ctx, next); err != nil {
			t.Fatal(err)
		}

		// Concurrent holders: exactly one wins.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  []string
			errs []error
		)
		for _, h := range []string{"h1", "h2", "h3", "h4", "h5", "h6"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.AcquireLease(ctx, "race", h, time.Minute)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, h)
				case !errors.As(err, new(*snapshot.LeaseHeldError)):
					errs = append(errs, err)
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 || len(errs) != 0 {
			t.Fatalf("concurrent acquire: winners %v, errors %v", won, errs)
		}
		if _, err := s.AcquireLease(ctx, "", "a", time.Minute); err == nil {
			t.Fatal("a lease without a name was taken")
		}
	})
}
