package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	body := "store:\n  url: sqlite://" + filepath.Join(dir, "s.db") + "\n" +
		"status:\n  listen: 127.0.0.1:0\n" +
		"drift:\n  dir: " + filepath.Join(dir, "drift") + "\n" + extra
	c, err := config.Parse("test.yaml", []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// started runs a Daemon made from opts until stop is called (at the
// latest when the test ends) and returns it once it has started, with its
// status API address. stop returns Run's error.
func started(t *testing.T, opts Options) (d *Daemon, addr string, stop func() error) {
	t.Helper()
	addrc := make(chan string, 1)
	opts.Started = func(a string) { addrc <- a }
	d = New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				err = errors.New("Run did not return within 30s")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not started")
	}
	return d, addr, stop
}

// Run starts every part on SQLite and stops all of them when ctx ends:
// goleak in TestMain proves no goroutine is left.
func TestRunAndStop(t *testing.T) {
	cfg := testConfig(t, "replica_id: unit\npoll:\n  interval: 100ms\n")
	var reloads atomic.Int32
	d, addr, stop := started(t, Options{Config: cfg, Version: "test",
		Reload: func() (*config.Config, error) {
			reloads.Add(1)
			next := *cfg
			next.DriftSchedule = "@every 1h"
			return &next, nil
		}})
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d.Reload()
	d.DriftNow()
	d.DriftNow() // coalesces
	latest := filepath.Join(cfg.DriftDir, LatestDriftFile)
	var b []byte
	proctest.Eventually(t, 30*time.Second, 10*time.Millisecond, "drift report written", func() bool {
		b, err = os.ReadFile(latest)
		return err == nil
	})
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil || rep["replica"] != "unit" {
		t.Fatalf("latest.json: %v %s", err, b)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if reloads.Load() != 1 {
		t.Fatalf("reloads %d", reloads.Load())
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	if err := writeAtomic(dir, "latest.json", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(dir, "latest.json", []byte("two")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "latest.json"))
	entries, _ := os.ReadDir(dir)
	if string(b) != "two" || len(entries) != 1 {
		t.Fatalf("%q, %d files", b, len(entries))
	}
	if err := writeAtomic(filepath.Join(dir, "missing"), "x.json", nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err = %v", err)
	}
}

func TestDriftSchedule(t *testing.T) {
	var n atomic.Int32
	s, err := newDriftSchedule("@every 1h", func() { n.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.set("61 * * * *"); err == nil || !strings.Contains(err.Error(), "drift.schedule") {
		t.Fatalf("err = %v", err)
	}
	if err := s.set(""); err != nil || s.on {
		t.Fatalf("disable: %v %v", err, s.on)
	}
	if err := s.set("*/5 * * * * *"); err != nil || !s.on {
		t.Fatalf("seconds spec: %v", err)
	}
	s.start()
	<-s.stop().Done()
}

// A reload names the changed keys that wait for a restart, every key
// included (derived from the key list), and not those it applies at once.
func TestRestartKeys(t *testing.T) {
	a := testConfig(t, "")
	b := *a
	b.LogLevel, b.DriftDir, b.DriftSchedule = 8, "elsewhere", "@every 1h"
	if got := restartKeys(a, &b); len(got) != 0 {
		t.Fatalf("keys applied at once reported: %v", got)
	}
	b.ReplicaURL, b.ApplyTimeout, b.ExecCommand = "http://127.0.0.1:1", time.Hour, []string{"x"}
	got := restartKeys(a, &b)
	if want := []string{config.KeyApplyTimeout, config.KeyExecCommand, config.KeyReplicaURL}; !slices.Equal(got, want) {
		t.Fatalf("restartKeys = %v, want %v", got, want)
	}
}
