package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// heartbeatStore writes heartbeat rows.
type heartbeatStore interface {
	Heartbeat(ctx context.Context, r snapshot.Heartbeat) (clash string, err error)
}

// loopStatus is what a heartbeat reports.
type loopStatus interface {
	Status() reconcile.Status
}

// heartbeater upserts this replica's sys_reconciler_replica row at once
// after a pass that changed what the row reports (its wake says so) and
// otherwise every HeartbeatInterval, less up to a tenth at random (so that
// a fleet started at once does not write in bursts).
type heartbeater struct {
	store   heartbeatStore
	status  loopStatus
	version string
	log     *slog.Logger
	every   time.Duration
	wake    *beatWake
	// converged, when the replica is driven, is its converged revision
	// given the loop's applied one (replica.Driver.Converged); nil: the
	// loop's registries are what is served.
	converged func(applied int64) (int64, time.Time)
	// node, if set, reports the replica node beside the sidecar.
	node func() snapshot.Node

	mu      sync.Mutex
	failing bool
	clash   string    // another process writing this replica id's heartbeat
	clashAt time.Time // when it was last seen
}

// beatWake asks for a heartbeat now when what the row reports changed:
// applied changes, counts per state, the pass's error, the cursor's seq,
// the first sync (onPass, the loop's hook), or a change the replica
// driver or restarter made served (poke). It is made before the loop and
// the driver that tell it, and the heartbeater after them.
type beatWake struct {
	ch chan struct{}

	mu      sync.Mutex
	lastErr string
	lastSeq int64
}

func newBeatWake() *beatWake { return &beatWake{ch: make(chan struct{}, 1)} }

// poke asks for a heartbeat now. It never blocks; pokes coalesce, at most
// one heartbeat per minBeatGap.
func (w *beatWake) poke() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// onPass is the loop's OnPass hook: it must not block.
func (w *beatWake) onPass(p reconcile.PassResult) {
	w.mu.Lock()
	changed := p.Err != w.lastErr || (p.Err == "" && p.Cursor.Seq != w.lastSeq)
	w.lastErr = p.Err
	if p.Err == "" {
		w.lastSeq = p.Cursor.Seq
	}
	w.mu.Unlock()
	if len(p.Changes) == 0 && !changed && p.Cause != reconcile.CauseStart {
		return
	}
	w.poke()
}

// minBeatGap spaces heartbeats asked for at once: a burst of changes
// served one after the other writes a few rows, not one per change.
const minBeatGap = 250 * time.Millisecond

func (h *heartbeater) run(ctx context.Context) error {
	t := time.NewTimer(keepalive(h.every))
	defer t.Stop()
	h.beat(ctx)
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-h.wake.ch:
			if gap := minBeatGap - time.Since(last); gap > 0 && !backoff.Wait(ctx, gap) {
				return nil
			}
		}
		last = time.Now()
		t.Reset(keepalive(h.every))
		if ctx.Err() != nil {
			return nil
		}
		h.beat(ctx)
	}
}

// keepalive is the wait before the next keepalive heartbeat: every, less
// up to a tenth at random.
func keepalive(every time.Duration) time.Duration {
	return every - time.Duration(rand.Int64N(int64(every/10)+1))
}

// beatTimeout bounds one heartbeat write.
const beatTimeout = 2 * time.Second

// beat writes a heartbeat, logging a failure once until it recovers (the
// store being down is reported by the loop already). A stop does not cut a
// write short: a statement cancelled on the client may still commit on the
// server, after the last heartbeat, and overwrite its "stopped".
func (h *heartbeater) beat(ctx context.Context) {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), beatTimeout)
	defer cancel()
	err := h.write(bctx, false)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil && !h.failing && ctx.Err() == nil:
		h.failing = true
		h.log.WarnContext(ctx, "heartbeat not written", slog.String("error", err.Error()))
	case err == nil && h.failing:
		h.failing = false
		h.log.InfoContext(ctx, "heartbeats written again")
	}
}

var hostname = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
})

func (h *heartbeater) write(ctx context.Context, stopped bool) error {
	st := h.status.Status()
	counts := make(map[string]int64)
	for kind, byState := range st.Counts {
		for state, n := range byState {
			counts[string(kind)+"/"+string(state)] = int64(n)
		}
	}
	started := st.StartedAt
	if started.IsZero() {
		started = time.Now()
	}
	r := snapshot.Heartbeat{
		ReplicaID:   st.ReplicaID,
		Host:        hostname(),
		PID:         os.Getpid(),
		Version:     h.version,
		StartedAt:   started,
		HeartbeatAt: time.Now(),
		Cursor:      st.Cursor.String(),
		CursorSeq:   st.Cursor.Seq,
		CursorAt:    st.Cursor.At,
		Counts:      counts,
		Stopped:     stopped,
		LastError:   st.LastError,
	}
	r.HeadRevision, r.ConvergedRevision, r.ConvergedAt = st.Revision, st.Revision, st.RevisionAt
	if h.converged != nil {
		r.ConvergedRevision, r.ConvergedAt = h.converged(st.Revision)
	}
	if h.node != nil {
		r.Node = h.node()
	}
	clash, err := h.store.Heartbeat(ctx, r)
	if err != nil {
		return fmt.Errorf("heartbeat of %s: %w", r.ReplicaID, err)
	}
	if clash != "" {
		h.mu.Lock()
		fresh := h.clash != clash || time.Since(h.clashAt) > 3*h.every
		h.clash, h.clashAt = clash, time.Now()
		h.mu.Unlock()
		if fresh {
			h.log.WarnContext(ctx, "another process writes this replica id's heartbeat: give each sidecar its own replica_id",
				slog.String("replica", r.ReplicaID), slog.String("other", clash))
		}
	}
	return nil
}

// warnings returns what the status shows beside the loop's state: another
// live process seen writing this replica id within 3 heartbeat intervals.
func (h *heartbeater) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clash == "" || time.Since(h.clashAt) > 3*h.every {
		return nil
	}
	return []string{DuplicateReplicaWarning(h.clash, time.Since(h.clashAt))}
}

// DuplicateReplicaWarning says that another process (other: "host pid N")
// wrote this replica id's heartbeat ago.
func DuplicateReplicaWarning(other string, ago time.Duration) string {
	return fmt.Sprintf("replica id in use by another live process too (%s, seen %s ago): their heartbeats overwrite each other; give each sidecar its own replica_id",
		other, ago.Round(time.Second))
}
