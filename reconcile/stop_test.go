package reconcile

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// stuck is a materializer that ignores its context: the calls numbered in
// block wait for release, the others succeed.
type stuck struct {
	*counter
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newStuck(t *testing.T, block func(call int64) bool) *stuck {
	s := &stuck{entered: make(chan struct{}, 16), release: make(chan struct{})}
	s.counter = newCounter(func(ctx context.Context, d Desired) error {
		n := s.total.Load()
		if block(n) {
			s.entered <- struct{}{}
			<-s.release // ignores ctx on purpose
		}
		return nil
	})
	t.Cleanup(s.unblock)
	return s
}

func (s *stuck) unblock() { s.once.Do(func() { close(s.release) }) }

// gauge reads the value of a gauge without labels from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	proctest.Eventually(t, 30*time.Second, 5*time.Millisecond, what, cond)
}

// TestStopBoundWithHungMaterializer: a materializer that ignores its
// context (apply.timeout is an hour) does not hold up Run once its context
// ends; the abandoned goroutine is counted until it returns.
func TestStopBoundWithHungMaterializer(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewSQLite(t)
	m := newStuck(t, func(int64) bool { return true })
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	if v := gauge(t, reg, "reconciler_abandoned_goroutines"); v != 0 {
		t.Fatalf("reconciler_abandoned_goroutines = %v at the start, want 0", v)
	}
	b := start(t, s, url, Options{ResyncInterval: -1, ApplyTimeout: time.Hour, StopTimeout: 300 * time.Millisecond,
		Metrics: metrics, Materializers: map[registry.Kind]Materializer{registry.KindEngine: m}})
	b.exec(`INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('o','object','account','{"fields":{}}')`)
	select {
	case <-m.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("materializer not called")
	}

	b.cancel()
	b.cancel = nil
	select {
	case err := <-b.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return while a materializer ignores its context")
	}
	if n := b.rec.Status().Abandoned; n != 1 {
		t.Errorf("status: %d abandoned, want 1", n)
	}
	if v := gauge(t, reg, "reconciler_abandoned_goroutines"); v != 1 {
		t.Errorf("reconciler_abandoned_goroutines = %v, want 1", v)
	}
	e, _ := b.entry(registry.KindEngine, "object/account")
	if e.State != registry.StateDegraded || !strings.Contains(e.Reason, "stopping") {
		t.Errorf("entry: %s %q, want degraded because the reconciler is stopping", e.State, e.Reason)
	}

	m.unblock()
	waitUntil(t, "the abandoned goroutine to return", func() bool { return b.rec.Status().Abandoned == 0 })
	if v := gauge(t, reg, "reconciler_abandoned_goroutines"); v != 0 {
		t.Errorf("reconciler_abandoned_goroutines = %v after it returned, want 0", v)
	}
	if n := m.open.Load(); n != 0 {
		t.Errorf("%d instances built by the abandoned call left open", n)
	}
}

// TestNoRetryWhileAbandonedAttemptRuns: an entry whose abandoned attempt
// has not returned is not tried again (one goroutine per entry at most);
// once it returns, the next retry runs.
func TestNoRetryWhileAbandonedAttemptRuns(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewSQLite(t)
	m := newStuck(t, func(call int64) bool { return call == 1 })
	b := start(t, s, url, Options{ResyncInterval: -1, ApplyTimeout: 50 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond,
		Materializers: map[registry.Kind]Materializer{registry.KindEngine: m}})
	b.exec(`INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('o','object','account','{"fields":{}}')`)
	<-m.entered
	const held = "previous attempt still running"
	attempts := func() int {
		e, _ := b.entry(registry.KindEngine, "object/account")
		if !strings.Contains(e.Reason, held) {
			return 0
		}
		return e.Attempts
	}
	// Several retries come and go while the first call is stuck.
	waitUntil(t, "retries held back", func() bool { return attempts() >= 4 })
	if n := m.count("object/account"); n != 1 {
		t.Fatalf("%d calls while the first is stuck, want 1", n)
	}
	if n := b.rec.Status().Abandoned; n != 1 {
		t.Fatalf("%d abandoned, want 1", n)
	}

	m.unblock()
	waitUntil(t, "ready after the stuck call returned", func() bool {
		return b.state(registry.KindEngine, "object/account") == registry.StateReady
	})
	if n := m.count("object/account"); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
	waitUntil(t, "nothing abandoned", func() bool { return b.rec.Status().Abandoned == 0 })
}

// syncBuffer is a log sink safe for the goroutines of abandoned calls.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A materializer returning a nil pointer in a non-nil interface (as a
// failed build easily does) never has it closed: neither when it answers
// in time nor when it answers after being abandoned.
func TestTypedNilInstance(t *testing.T) {
	var logs syncBuffer
	r := New(nil, Options{ApplyTimeout: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	d := Desired{Kind: registry.KindEngine, Key: "object/a"}
	typedNil := MaterializerFunc(func(context.Context, Desired) (registry.Instance, error) {
		var p *countedInstance
		return p, nil
	})
	inst, err := materializeOne(context.Background(), r, typedNil, d)
	if err != nil || inst != (NopInstance{}) {
		t.Fatalf("typed nil in time: %v, %v; want NopInstance", inst, err)
	}
	release := make(chan struct{})
	late := MaterializerFunc(func(context.Context, Desired) (registry.Instance, error) {
		<-release
		var p *countedInstance
		return p, nil
	})
	if _, err := materializeOne(context.Background(), r, late, d); err == nil {
		t.Fatal("late materializer: no error")
	}
	close(release)
	waitUntil(t, "the abandoned call to return", func() bool { return r.abandoned.count() == 0 })
	if strings.Contains(logs.String(), "panicked") {
		t.Fatalf("closing a typed nil:\n%s", logs.String())
	}
}

// materializeOne calls m as the loop does (guarded, with apply.timeout): a
// panic or a hang is a transient failure of this entry only; a
// materializer that ignores its context is abandoned and whatever it
// returns later is closed.
func materializeOne(ctx context.Context, r *Reconciler, m Materializer, d Desired) (registry.Instance, error) {
	var (
		inst registry.Instance
		err  error
	)
	r.guarded(ctx, 1, 1, func(int) (Materializer, Desired, bool) { return m, d, true },
		func(_ int, i registry.Instance, e error) { inst, err = i, e })
	return inst, err
}
