package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/internal/config"
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

// Run starts every part on SQLite and stops all of them when ctx ends:
// goleak in TestMain proves no goroutine is left.
func TestRunAndStop(t *testing.T) {
	cfg := testConfig(t, "replica_id: unit\npoll:\n  interval: 100ms\n")
	addrc := make(chan string, 1)
	var reloads atomic.Int32
	d := New(Options{Config: cfg, Version: "test", Started: func(a string) { addrc <- a },
		Reload: func() (*config.Config, error) {
			reloads.Add(1)
			next := *cfg
			next.DriftSchedule = "@every 1h"
			return &next, nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not started")
	}
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
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		if b, err := os.ReadFile(latest); err == nil {
			var rep map[string]any
			if err := json.Unmarshal(b, &rep); err != nil || rep["replica"] != "unit" {
				t.Fatalf("latest.json: %v %s", err, b)
			}
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("no drift report")
		}
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
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

func TestRestartKeys(t *testing.T) {
	a := testConfig(t, "")
	b := *a
	b.PollInterval = 7 * time.Second
	b.LogLevel = -4
	b.ExecCommand = []string{"x"}
	got := strings.Join(restartKeys(a, &b), ",")
	if got != "poll.interval,notify.exec.command" {
		t.Fatalf("%s", got)
	}
}
