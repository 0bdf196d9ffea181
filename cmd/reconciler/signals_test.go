package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// heldProxy forwards TCP connections to target, but only once released:
// until then a client connecting through it waits (a store that is slow to
// answer keeps the daemon in its startup).
type heldProxy struct {
	ln        net.Listener
	accepted  atomic.Bool // a connection is waiting (or was)
	release   chan struct{}
	releaseMu sync.Once
	wg        sync.WaitGroup
}

func newHeldProxy(t *testing.T, target string) *heldProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldProxy{ln: ln, release: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			p.accepted.Store(true)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				<-p.release
				up, err := net.Dial("tcp", target)
				if err != nil {
					_ = c.Close()
					return
				}
				track(up)
				var copies sync.WaitGroup
				copies.Add(2)
				go func() { defer copies.Done(); _, _ = io.Copy(up, c); _ = up.Close() }()
				go func() { defer copies.Done(); _, _ = io.Copy(c, up); _ = c.Close() }()
				copies.Wait()
			}()
		}
	}()
	t.Cleanup(func() {
		p.open()
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *heldProxy) open() { p.releaseMu.Do(func() { close(p.release) }) }

// TestSignalBurstDuringStartup: bursts of SIGHUP (and SIGUSR1, SIGUSR2)
// while the daemon is still starting neither kill it nor race with its
// startup (under -race the daemon binary is built with -race), and each
// burst costs at most one reload per signal. The store's answers are held
// back so that the bursts land while startup waits on the store.
func TestSignalBurstDuringStartup(t *testing.T) {
	t.Parallel()
	storeURL := snapshottest.NewPostgresURL(t)
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newHeldProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	dir := t.TempDir()
	writeConfig(t, dir, "store:\n  url: "+u.String()+"\ndrift:\n  dir: ./drift\n  schedule: \"@every 1h\"\n")
	d := launchDaemon(t, daemonOpts{dir: dir, args: []string{"--config", "config.yaml", "--log.level", "debug",
		"--poll.interval", "100ms"}})

	// The daemon has read its configuration and waits on the store.
	eventually(t, 60*time.Second, "startup waiting on the store", func() bool {
		return proxy.accepted.Load() && strings.Contains(d.out.String(), `"msg":"starting"`)
	})
	sent := 0
	burst := func() {
		for range 50 {
			d.signal(syscall.SIGHUP)
			sent++
		}
		d.signal(syscall.SIGUSR1)
		d.signal(syscall.SIGUSR2)
	}
	burst()
	// Let startup go on while bursts keep coming, until it has started.
	proxy.open()
	deadline := time.After(60 * time.Second)
	pace := time.NewTicker(2 * time.Millisecond)
	defer pace.Stop()
	for !strings.Contains(d.out.String(), `"msg":"reconciler started"`) {
		select {
		case <-d.done:
			t.Fatalf("daemon exited (%d) during startup", d.code)
		case <-deadline:
			t.Fatal("daemon did not start")
		case <-pace.C:
		}
		burst()
	}
	d.waitStarted(time.Second)
	burst()
	eventually(t, 60*time.Second, "ready", func() bool { code, _ := d.request("GET", "/readyz"); return code == 200 })

	reloads := strings.Count(d.out.String(), `"msg":"config reloaded"`)
	if reloads == 0 || reloads > sent {
		t.Errorf("%d reloads for %d SIGHUPs", reloads, sent)
	}
	t.Logf("%d SIGHUPs, %d reloads", sent, reloads)

	d.signal(syscall.SIGTERM)
	if code := d.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if out := d.out.String(); strings.Contains(out, "DATA RACE") {
		t.Fatalf("data race in the daemon:\n%s", out)
	}
}

// startStuck starts a daemon on store whose connector's probe then waits on
// an upstream that never answers while the test runs (apply.timeout is an
// hour), and returns once the probe has reached it.
func startStuck(t *testing.T, store string, args ...string) *proc {
	t.Helper()
	reached := make(chan struct{}, 1)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case reached <- struct{}{}:
		default:
		}
		<-release
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{dir: dir, args: append([]string{"--store.url", store, "--poll.interval", "100ms",
		"--apply.timeout", "1h", "--drift.schedule", "", "--resync.interval", "0s"}, args...)})
	eventually(t, 60*time.Second, "ready", func() bool { code, _ := d.request("GET", "/readyz"); return code == 200 })
	snapshottest.Exec(t, store, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('c', 'connector', 'stuck', $1)`,
		`{"provider":"rest","providerConfig":{"baseUrl":"`+up.URL+`","timeout":"1h"},"auth":{"type":"none"},"enabled":true}`)
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("the connector's probe never reached upstream")
	}
	return d
}

// TestStopBoundWithHungProbe: SIGTERM while a connector's probe waits on an
// upstream that never answers: the daemon exits 0 within 5 s of the
// signal, with a stopped heartbeat.
func TestStopBoundWithHungProbe(t *testing.T) {
	t.Parallel()
	store := snapshottest.NewPostgresURL(t)
	d := startStuck(t, store, "--replica_id", "hung")
	sent := time.Now()
	d.signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after SIGTERM:\n%s", d.out.String())
	}
	t.Logf("exited %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
	if d.code != 0 {
		t.Fatalf("exit %d after SIGTERM", d.code)
	}
	if stopped, ok := heartbeat(t, store, "hung"); !ok || !stopped {
		t.Fatalf("heartbeat found %v stopped %v", ok, stopped)
	}
}

// TestSecondSignalExitsAtOnce: the first SIGTERM lets the pass in flight
// go on (within the stop bound); a second one exits at once with code 1.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	d := startStuck(t, "sqlite://"+filepath.Join(t.TempDir(), "store.db"))
	d.signal(syscall.SIGTERM)
	eventually(t, 10*time.Second, "first stop signal logged", func() bool {
		return strings.Contains(d.out.String(), "finishing the pass in flight")
	})
	select {
	case <-d.done:
		t.Fatalf("exited (%d) on the first signal while a pass was in flight", d.code)
	default:
	}
	d.signal(syscall.SIGTERM)
	if code := d.wait(10 * time.Second); code != 1 {
		t.Fatalf("second signal: exit %d, want 1", code)
	}
}
