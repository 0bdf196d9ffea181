package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease is a named, expiring hold of one duty of the fleet, such as the
// schema repair of the replicas (LeaseRepair) or a replica restart: at most
// one holder at a time, by the store's clock. A holder that dies loses it
// when it expires; a live one renews it before then.
type Lease struct {
	// Name is the duty ("repair", "restart", …).
	Name string `json:"name"`
	// Holder is who holds it (a replica id).
	Holder string `json:"holder"`
	// Token grows with every acquisition by a new holder (or by the same
	// holder after the lease expired or was released): a fencing token.
	// Renew and Release act only on the token they were given.
	Token int64 `json:"token"`
	// AcquiredAt and ExpiresAt are by the store's clock.
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Held reports whether the lease is held at now (by any holder).
func (l Lease) Held(now time.Time) bool { return l.Holder != "" && now.Before(l.ExpiresAt) }

// Leaser is the store's one lease mechanism. Every store implements it.
type Leaser interface {
	// AcquireLease takes lease name for holder until ttl from now (store
	// clock): when nobody holds it, when it expired, or when holder
	// already holds it (then it is extended, same token). Otherwise it
	// returns a *LeaseHeldError naming the current holder.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// RenewLease extends l until ttl from now. It fails with ErrLeaseLost
	// when l is no longer held with its token (expired, released, or taken
	// over).
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease ends l at once, if it is still held with its token
	// (releasing a lost lease does nothing).
	ReleaseLease(ctx context.Context, l Lease) error
	// ReadLease returns lease name as stored (ok false: never taken). It
	// may have expired: check Held with the store's time.
	ReadLease(ctx context.Context, name string) (l Lease, ok bool, now time.Time, err error)
}

// LeaseRepair is the lease of the replicas' schema repair: one sidecar of
// the fleet at a time has the platform sync an object's storage.
const LeaseRepair = "repair"

// ErrLeaseLost: the lease is no longer held with that token.
var ErrLeaseLost = errors.New("lease lost")

// LeaseHeldError says that another holder has the lease.
type LeaseHeldError struct {
	Lease Lease
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease %s is held by %s until %s", e.Lease.Name, e.Lease.Holder, e.Lease.ExpiresAt.UTC().Format(time.RFC3339))
}

// CheckLease checks the arguments every store's AcquireLease takes.
func CheckLease(name, holder string, ttl time.Duration) error {
	switch {
	case name == "":
		return errors.New("lease: empty name")
	case holder == "":
		return errors.New("lease: empty holder")
	case ttl < time.Millisecond:
		return fmt.Errorf("lease %s: ttl %s below 1ms", name, ttl)
	}
	return nil
}
