package bench

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// nopEngine materializes engine entries as no-op instances, so that the
// figures measure the loop and the store, not a compiler.
func nopEngine() map[registry.Kind]reconcile.Materializer {
	return map[registry.Kind]reconcile.Materializer{registry.KindEngine: reconcile.MaterializerFunc(
		func(context.Context, reconcile.Desired) (registry.Instance, error) {
			return reconcile.NopInstance{}, nil
		})}
}

// applied is what the loop reported about one key.
type applied struct {
	rev  int64
	at   time.Time
	pass time.Duration
}

// loop is one running reconciler with its own store pool.
type loop struct {
	store  snapshot.Store
	rec    *reconcile.Reconciler
	rctx   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	idle     int64 // poll passes that changed nothing
	passes   int64
	seen     map[string]applied // engine key → newest applied change
	wake     chan struct{}
	changeDs []time.Duration // durations of poll/hint passes that applied changes
}

type loopOptions struct {
	interval time.Duration
	hint     bool
	jitter   bool // the default poll jitter, up to 10% early (else none)
	maxConns int32
}

// startLoop opens a store at dbURL and runs a reconciler over it until
// stop; it returns once the first full sync is done.
func startLoop(ctx context.Context, dbURL string, o loopOptions) (*loop, error) {
	s, err := snapshot.Open(dbURL, snapshot.OpenOptions{MaxConns: o.maxConns})
	if err != nil {
		return nil, err
	}
	l := &loop{store: s, seen: map[string]applied{}, wake: make(chan struct{}, 1)}
	jitter := time.Duration(-1)
	if o.jitter {
		jitter = 0
	}
	l.rec = reconcile.New(s, reconcile.Options{
		ReplicaID:      "bench",
		PollInterval:   o.interval,
		PollJitter:     jitter,
		ResyncInterval: -1,
		Materializers:  nopEngine(),
		SyncGCPercent:  reconcile.DefaultSyncGCPercent, // as the daemon does
		OnPass:         l.onPass,
	})
	l.rctx, l.cancel = context.WithCancel(ctx)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_ = l.rec.Run(l.rctx)
	}()
	if o.hint {
		if err := l.listen(); err != nil {
			l.stop()
			return nil, err
		}
	}
	select {
	case <-l.rec.Synced():
	case <-ctx.Done():
		l.stop()
		return nil, ctx.Err()
	}
	return l, nil
}

// listen wires the store's LISTEN/NOTIFY hints to the loop, as the daemon
// does with hint.listen.
func (l *loop) listen() error {
	h, ok := l.store.(snapshot.Hinter)
	if !ok {
		return fmt.Errorf("store %s cannot hint", l.store.Kind())
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_ = h.Listen(l.rctx, l.rec.Hint)
	}()
	return nil
}

func (l *loop) onPass(p reconcile.PassResult) {
	now := time.Now()
	l.mu.Lock()
	l.passes++
	if len(p.Changes) == 0 && !p.Relist && p.Err == "" {
		l.idle++
	}
	if len(p.Changes) > 0 && !p.Relist {
		l.changeDs = append(l.changeDs, p.Duration)
	}
	for _, c := range p.Changes {
		if c.Kind != registry.KindEngine {
			continue
		}
		if a, ok := l.seen[c.Key]; !ok || c.Revision > a.rev {
			l.seen[c.Key] = applied{rev: c.Revision, at: now, pass: p.Duration}
		}
	}
	l.mu.Unlock()
	if len(p.Changes) > 0 {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (l *loop) idlePolls() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle
}

// waitApplied waits until key is applied at revision rev or later.
func (l *loop) waitApplied(ctx context.Context, key string, rev int64, timeout time.Duration) (applied, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		l.mu.Lock()
		a, ok := l.seen[key]
		l.mu.Unlock()
		if ok && a.rev >= rev {
			return a, true
		}
		select {
		case <-l.wake:
		case <-t.C:
			return applied{}, false
		case <-ctx.Done():
			return applied{}, false
		}
	}
}

// servingRevision is the revision the registry says the entry serves.
func (l *loop) servingRevision(key string) int64 {
	e, ok := l.rec.Registries().Get(registry.KindEngine, key)
	if !ok {
		return 0
	}
	return e.ServingRevision
}

func (l *loop) stop() {
	l.cancel()
	l.wg.Wait()
	l.store.Close()
}

// viaProxy returns dbURL with its host and port replaced by addr.
func viaProxy(dbURL, addr string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Host = addr
	return u.String(), nil
}

// hostPort is the host:port of dbURL.
func hostPort(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return u.Hostname() + ":5432", nil
	}
	return u.Host, nil
}
