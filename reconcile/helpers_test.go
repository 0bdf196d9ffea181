package reconcile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// counter is a test materializer that records calls and answers with the
// outcome chosen by fn (nil: ready).
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	total atomic.Int64
	fn    func(ctx context.Context, d Desired) error
	open  atomic.Int64 // live instances
}

func newCounter(fn func(ctx context.Context, d Desired) error) *counter {
	return &counter{calls: make(map[string]int), fn: fn}
}

type countedInstance struct {
	c      *counter
	closed atomic.Bool
}

func (i *countedInstance) Close() error {
	if i.closed.CompareAndSwap(false, true) {
		i.c.open.Add(-1)
	}
	return nil
}

func (c *counter) Materialize(ctx context.Context, d Desired) (registry.Instance, error) {
	c.mu.Lock()
	c.calls[d.Key]++
	c.mu.Unlock()
	c.total.Add(1)
	if c.fn != nil {
		if err := c.fn(ctx, d); err != nil {
			return nil, err
		}
	}
	c.open.Add(1)
	return &countedInstance{c: c}, nil
}

func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key]
}

func (c *counter) reset() {
	c.mu.Lock()
	c.calls = make(map[string]int)
	c.mu.Unlock()
	c.total.Store(0)
}

// bundle is one running loop over a real store.
type bundle struct {
	t      *testing.T
	store  snapshot.Store
	url    string
	rec    *Reconciler
	passes chan PassResult
	cancel context.CancelFunc
	done   chan error
	mats   map[registry.Kind]*counter
}

// start runs a Reconciler over s with counting materializers.
func start(t *testing.T, s snapshot.Store, url string, opts Options) *bundle {
	t.Helper()
	b := &bundle{t: t, store: s, url: url, passes: make(chan PassResult, 1024), done: make(chan error, 1),
		mats: map[registry.Kind]*counter{}}
	if opts.Materializers == nil {
		opts.Materializers = map[registry.Kind]Materializer{}
		for _, k := range []registry.Kind{registry.KindConnector, registry.KindDatasource, registry.KindEngine} {
			c := newCounter(nil)
			b.mats[k] = c
			opts.Materializers[k] = c
		}
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	prev := opts.OnPass
	opts.OnPass = func(p PassResult) {
		if prev != nil {
			prev(p)
		}
		select {
		case b.passes <- p:
		default:
		}
	}
	b.rec = New(s, opts)
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { b.done <- b.rec.Run(ctx) }()
	t.Cleanup(b.stop)
	select {
	case <-b.rec.Synced():
	case err := <-b.done:
		t.Fatalf("Run returned before the first sync: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no first sync within 30s")
	}
	return b
}

func (b *bundle) stop() {
	if b.cancel == nil {
		return
	}
	b.cancel()
	b.cancel = nil
	if err := <-b.done; err != nil {
		b.t.Errorf("Run: %v", err)
	}
}

// exec writes to the store with plain SQL ($1 placeholders on both stores).
func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	snapshottest.Exec(b.t, b.url, sql, args...)
}

// waitFor waits until cond holds, checking after every pass, or fails
// after the deadline.
func (b *bundle) waitFor(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-b.passes:
		case <-deadline:
			b.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// settle triggers a pass and waits until a pass that started after the
// trigger has finished, so every committed change is applied.
func (b *bundle) settle() {
	b.t.Helper()
	// Drain old notifications.
	for len(b.passes) > 0 {
		<-b.passes
	}
	mark := time.Now()
	b.rec.Reconcile()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case p := <-b.passes:
			if !p.At.Before(mark) && p.Err == "" {
				return
			}
		case <-deadline:
			b.t.Fatal("no pass after trigger within 30s")
		}
	}
}

func (b *bundle) entry(k registry.Kind, key string) (registry.Entry, bool) {
	return b.rec.Registries().Get(k, key)
}

func (b *bundle) state(k registry.Kind, key string) registry.State {
	e, ok := b.entry(k, key)
	if !ok {
		return ""
	}
	return e.State
}

func connectorBodyJSON(cred string) string {
	return fmt.Sprintf(`{"provider":"rest","providerConfig":{"baseUrl":"http://127.0.0.1:1"},"auth":{"type":"bearer","credentialRef":%q},"enabled":true}`, cred)
}
