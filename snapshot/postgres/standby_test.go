package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

const insStandbyMeta = `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ($1, 'object', $1, 'active', '{"fields":{}}')`

// standbyRig is a private primary with a migrated store and a streaming hot
// standby of it, and a store polling the standby.
type standbyRig struct {
	primary, standby *testdb.Cluster
	url, readURL     string
	store            snapshot.Store
	cur              snapshot.Cursor
	seen             map[string]bool // metadata keys polls returned
	xmax             uint64          // highest cursor xmax so far
}

func newStandbyRig(t *testing.T) *standbyRig {
	t.Helper()
	r := &standbyRig{primary: testdb.NewCluster(t), seen: map[string]bool{}}
	r.url = r.primary.URL("postgres")
	mig, err := snapshot.Open(r.url, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	mig.Close()
	r.standby = r.primary.NewStandby(t)
	r.readURL = r.standby.URL("postgres")
	r.store, err = snapshot.Open(r.url, snapshot.OpenOptions{ReadURL: r.readURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.store.Close)
	return r
}

// advance records a new cursor, failing when it moved backwards.
func (r *standbyRig) advance(t *testing.T, c snapshot.Cursor) {
	t.Helper()
	var xmin, xmax uint64
	if _, err := fmt.Sscanf(c.PGSnapshot, "%d:%d:", &xmin, &xmax); err != nil {
		t.Fatalf("cursor %q: %v", c.PGSnapshot, err)
	}
	if xmax < r.xmax {
		t.Fatalf("cursor moved backwards: xmax %d after %d", xmax, r.xmax)
	}
	r.xmax, r.cur = xmax, c
}

// pollUntil polls until every key was returned, within 30 s.
func (r *standbyRig) pollUntil(t *testing.T, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		addrs, next, err := r.store.Poll(snapshottest.Ctx(t), r.cur)
		if err == nil {
			r.advance(t, next)
			for _, a := range addrs {
				r.seen[a.Key] = true
			}
		} else if !errors.Is(err, snapshot.ErrUnavailable) {
			t.Fatalf("poll: %v", err)
		}
		missing := 0
		for _, k := range keys {
			if !r.seen[k] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("polls on the standby never returned %v (cursor %s, last error %v)", keys, r.cur, err)
		}
		time.Sleep(20 * time.Millisecond) // poll cadence, not a wait for a condition
	}
}

// TestStandbyReadURL drives a store whose polls read a real streaming
// standby through a late commit, paused replay, a standby restart and a
// promotion: every change arrives, the cursor never moves backwards.
func TestStandbyReadURL(t *testing.T) {
	r := newStandbyRig(t)
	ctx := snapshottest.Ctx(t)
	pc := r.store.(snapshot.StandbyChecker)
	if err := pc.CheckStandby(ctx); err != nil {
		t.Fatalf("CheckStandby on a real standby: %v", err)
	}
	rows, cur, err := r.store.Relist(ctx)
	if err != nil || rows.Len() != 0 {
		t.Fatalf("relist: %v (%d rows)", err, rows.Len())
	}
	r.advance(t, cur)

	snapshottest.Exec(t, r.url, insStandbyMeta, "a")
	r.pollUntil(t, "a")

	t.Run("late commit below the cursor's xmax", func(t *testing.T) {
		// On a standby pg_current_snapshot() lists no transaction in
		// progress: a poll that trusted it would skip "late".
		slow := snapshottest.Connect(t, r.url)
		if err := slow.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		slow.Exec(t, insStandbyMeta, "late")
		snapshottest.Exec(t, r.url, insStandbyMeta, "early")
		r.pollUntil(t, "early")
		if r.seen["late"] {
			t.Fatal("an uncommitted row was returned")
		}
		if err := slow.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		r.pollUntil(t, "late")
	})

	t.Run("replay paused", func(t *testing.T) {
		snapshottest.Exec(t, r.readURL, "SELECT pg_wal_replay_pause()")
		snapshottest.Exec(t, r.url, insStandbyMeta, "paused")
		deadline := time.Now().Add(30 * time.Second)
		var st snapshot.Stall
		for {
			st, err = r.store.Stall(ctx, r.cur, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if st.Standby != nil && st.Standby.ReplayPaused && st.Standby.ReplayLagBytes > 0 && st.Pending > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stall never named the paused standby's lag: %+v %+v", st, st.Standby)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for range 3 {
			addrs, next, err := r.store.Poll(ctx, r.cur)
			if err != nil {
				t.Fatal(err)
			}
			r.advance(t, next)
			if len(addrs) > 0 {
				t.Fatalf("poll returned %v while replay was paused", addrs)
			}
		}
		snapshottest.Exec(t, r.readURL, "SELECT pg_wal_replay_resume()")
		r.pollUntil(t, "paused")
	})

	t.Run("standby stopped and started", func(t *testing.T) {
		r.standby.Stop()
		if _, _, err := r.store.Poll(ctx, r.cur); !errors.Is(err, snapshot.ErrUnavailable) {
			t.Fatalf("poll with the standby down: %v, want ErrUnavailable", err)
		}
		snapshottest.Exec(t, r.url, insStandbyMeta, "while-down")
		r.standby.Start()
		r.pollUntil(t, "while-down")
	})

	t.Run("standby promoted after the primary stopped", func(t *testing.T) {
		snapshottest.Exec(t, r.url, insStandbyMeta, "before-stop")
		r.pollUntil(t, "before-stop")
		r.primary.Stop()
		r.standby.Promote()
		snapshottest.Exec(t, r.readURL, insStandbyMeta, "after-promote")
		r.pollUntil(t, "after-promote")
		_, cur, err := r.store.Relist(ctx)
		if err != nil {
			t.Fatalf("relist on the promoted standby: %v", err)
		}
		r.advance(t, cur)
		snapshottest.Exec(t, r.readURL, insStandbyMeta, "after-relist")
		r.pollUntil(t, "after-relist")
	})
}

// TestStandbyRefused: a read URL that is not a hot standby of the store is
// refused, saying what it is instead.
func TestStandbyRefused(t *testing.T) {
	r := newStandbyRig(t)
	ctx := snapshottest.Ctx(t)
	other := testdb.NewCluster(t)
	otherStandby := other.NewStandby(t)

	// A second store in another database of the same cluster.
	snapshottest.Exec(t, r.url, "CREATE DATABASE second")
	second := strings.Replace(r.url, "/postgres?", "/second?", 1)
	mig, err := snapshot.Open(second, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	mig.Close()
	secondOnStandby := strings.Replace(r.readURL, "/postgres?", "/second?", 1)

	for _, c := range []struct {
		name, read string
		want       error
		says       string
	}{
		{"primary", r.url, snapshot.ErrNotStandby, "is a primary"},
		{"standby of another cluster", otherStandby.URL("postgres"), snapshot.ErrNotStandby, "another cluster"},
		{"another store", secondOnStandby, snapshot.ErrNotStandby, "another store"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := snapshot.Open(r.url, snapshot.OpenOptions{ReadURL: c.read})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check := s.(snapshot.StandbyChecker)
			deadline := time.Now().Add(30 * time.Second)
			for {
				err = check.CheckStandby(ctx)
				// The second store's database and schema may not be
				// replayed yet.
				if !(errors.Is(err, snapshot.ErrSchema) || errors.Is(err, snapshot.ErrUnavailable)) || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("CheckStandby = %v, want %v saying %q", err, c.want, c.says)
			}
		})
	}
	if _, err := snapshot.Open("sqlite://x.db", snapshot.OpenOptions{ReadURL: r.readURL}); !errors.Is(err, snapshot.ErrBadURL) {
		t.Fatalf("sqlite store with a read url: %v, want ErrBadURL", err)
	}
}

// switchProxy forwards TCP connections to one of two targets; switching
// cuts the open connections (as a balancer moving clients would).
type switchProxy struct {
	l      net.Listener
	mu     sync.Mutex
	target string
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{l: l, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		p.switchTo("")
		p.wg.Wait()
	})
	return p
}

// switchTo sends new connections to target and cuts the open ones.
func (p *switchProxy) switchTo(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestStandbyBehindCursor: the read URL moves to a standby that is behind
// the cursor (a second standby behind a balancer, paused): polls wait
// without an error and without moving the cursor back, a relist refuses
// to go back, and once it replays every change arrives.
func TestStandbyBehindCursor(t *testing.T) {
	r := newStandbyRig(t)
	ctx := snapshottest.Ctx(t)
	second := r.primary.NewStandby(t)
	hostport := func(u string) string { return strings.Split(strings.Split(u, "@")[1], "/")[0] }
	proxy := newSwitchProxy(t, hostport(r.readURL))
	viaProxy := strings.Replace(r.readURL, hostport(r.readURL), proxy.l.Addr().String(), 1)
	store, err := snapshot.Open(r.url, snapshot.OpenOptions{ReadURL: viaProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r.store = store
	_, cur, err := store.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.advance(t, cur)

	snapshottest.Exec(t, second.URL("postgres"), "SELECT pg_wal_replay_pause()")
	snapshottest.Exec(t, r.url, insStandbyMeta, "ahead")
	r.pollUntil(t, "ahead")

	proxy.switchTo(hostport(second.URL("postgres")))
	held := r.cur
	waited := 0
	for range 5 {
		addrs, next, err := store.Poll(ctx, r.cur)
		if err != nil && !errors.Is(err, snapshot.ErrUnavailable) {
			t.Fatalf("poll on a standby behind the cursor: %v", err)
		}
		if err == nil {
			waited++
			if len(addrs) > 0 || next.PGSnapshot != held.PGSnapshot {
				t.Fatalf("poll on a standby behind the cursor moved it: %v, %s → %s", addrs, held, next)
			}
		}
	}
	if waited == 0 {
		t.Fatal("no poll reached the standby behind the cursor")
	}
	if _, _, err := store.Relist(ctx); !errors.Is(err, snapshot.ErrUnavailable) {
		t.Fatalf("relist on a standby behind the cursor = %v, want ErrUnavailable (waiting)", err)
	}
	snapshottest.Exec(t, r.url, insStandbyMeta, "later")
	snapshottest.Exec(t, second.URL("postgres"), "SELECT pg_wal_replay_resume()")
	r.pollUntil(t, "later")
}
