package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// daemon is one `reconciler run` subprocess that can be killed and
// restarted with the same configuration.
type daemon struct {
	rig   *rig
	id    string
	dir   string
	cfg   map[string]any // nested config, written as config.yaml
	env   []string
	bin   string // the binary to run ("": the suite's)
	token string
	log   *proctest.Buffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	addr string
}

// conf sets a dotted config key in a nested map.
func conf(m map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// baseConfig is what every daemon of the suite runs with: fast polls, a
// free port, debug logs in JSON (so that the canary search sees the most).
// The phases delete in bulk on purpose (random deletes under load,
// impostors, huge rows), so the eviction guard is off; the guard's own
// phase (guard_test.go) turns it on.
func baseConfig(id, storeURL string) map[string]any {
	m := map[string]any{}
	for k, v := range map[string]any{
		"replica_id":          id,
		"store.url":           storeURL,
		"poll.interval":       "100ms",
		"poll.jitter":         "20ms",
		"resync.interval":     "0s",
		"hint.listen":         true,
		"apply.concurrency":   4,
		"apply.timeout":       "5s",
		"journal.retention":   "24h",
		"drift.schedule":      "@every 2s",
		"drift.dir":           "./drift",
		"status.listen":       "127.0.0.1:0",
		"log.level":           "debug",
		"log.format":          "json",
		"guard.max_evictions": "off",
	} {
		conf(m, k, v)
	}
	return m
}

// newDaemon prepares (does not start) a daemon; opts edit its config.
func (r *rig) newDaemon(id, storeURL string, opts ...func(map[string]any)) *daemon {
	r.t.Helper()
	dir := filepath.Join(r.dir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	d := &daemon{rig: r, id: id, dir: dir, cfg: baseConfig(id, storeURL), log: proctest.NewBuffer()}
	for _, o := range opts {
		o(d.cfg)
	}
	r.mu.Lock()
	r.daemons = append(r.daemons, d)
	r.mu.Unlock()
	return d
}

// set returns an option setting a dotted key.
func set(key string, v any) func(map[string]any) {
	return func(m map[string]any) { conf(m, key, v) }
}

// start starts the daemon and waits until its status API listens.
func (d *daemon) start() {
	t := d.rig.t
	t.Helper()
	cfg, _ := json.MarshalIndent(d.cfg, "", "  ") // JSON is YAML
	if err := os.WriteFile(filepath.Join(d.dir, "config.yaml"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(d.log, "{\"chaos\":\"start %s\"}\n", d.id)
	from := d.log.Len()
	bin := binary
	if d.bin != "" {
		bin = d.bin
	}
	cmd := exec.Command(bin, "run", "--config", "config.yaml")
	cmd.Dir = d.dir
	cmd.Env = append(proctest.CleanEnv(), d.env...)
	cmd.Stdout, cmd.Stderr = d.log, d.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	d.mu.Lock()
	d.cmd, d.done, d.addr = cmd, done, ""
	d.mu.Unlock()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		if addr := proctest.StartedAddr(d.log.String()[from:]); addr != "" {
			d.mu.Lock()
			d.addr = addr
			d.mu.Unlock()
			return
		}
		select {
		case <-d.log.Wrote:
		case <-done:
			t.Fatalf("%s exited before starting:\n%s", d.id, tail(d.log.String(), 4000))
		case <-deadline.C:
			t.Fatalf("%s did not start within 60s:\n%s", d.id, tail(d.log.String(), 4000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (d *daemon) running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd != nil && proctest.Open(d.done)
}

// kill sends SIGKILL and waits for the process to be gone.
func (d *daemon) kill() {
	d.rig.t.Helper()
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
	fmt.Fprintf(d.log, "{\"chaos\":\"killed %s\"}\n", d.id)
}

// signal sends s to the running process.
func (d *daemon) signal(s syscall.Signal) {
	d.mu.Lock()
	cmd := d.cmd
	d.mu.Unlock()
	if err := cmd.Process.Signal(s); err != nil {
		d.rig.t.Fatalf("signal %s %v: %v", d.id, s, err)
	}
}

// stop stops the daemon gracefully (SIGTERM) and returns its exit code.
func (d *daemon) stop() int {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	if cmd == nil {
		return 0
	}
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		d.rig.t.Errorf("%s did not stop within 60s of SIGTERM", d.id)
		return -1
	}
}

// request makes one HTTP request to the daemon's API (hdr may set "Host");
// the body is kept for the canary search. A transport error is returned, not fatal (the
// daemon may be down on purpose).
func (d *daemon) request(method, path string, body io.Reader, hdr map[string]string) (int, []byte, error) {
	d.mu.Lock()
	addr := d.addr
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, body)
	if err != nil {
		return 0, nil, err
	}
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	for k, v := range hdr {
		if k == "Host" { // a Host of the caller's choosing (DNS rebinding)
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	results.request()
	resp, err := d.rig.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	d.rig.seen("HTTP "+method+" "+path+" on "+d.id, b)
	for k, vs := range resp.Header {
		d.rig.seen("HTTP header "+k+" on "+d.id, []byte(strings.Join(vs, " ")))
	}
	return resp.StatusCode, b, err
}

// get fetches path and decodes its JSON into v.
func (d *daemon) get(path string, v any) error {
	code, b, err := d.request("GET", path, nil, nil)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("GET %s: %d %s", path, code, b)
	}
	return json.Unmarshal(b, v)
}

// item is one entry of GET /v1/items.
type item struct {
	Kind            string `json:"kind"`
	Key             string `json:"key"`
	Revision        int64  `json:"revision"`
	Signature       string `json:"signature"`
	State           string `json:"state"`
	Reason          string `json:"reason"`
	ServingRevision int64  `json:"serving_revision"`
}

func (d *daemon) items() ([]item, error) {
	var its []item
	return its, d.get("/v1/items", &its)
}

// status is the part of GET /v1/status the suite reads.
type status struct {
	StoreUp   bool   `json:"store_up"`
	Synced    bool   `json:"synced"`
	LastError string `json:"last_error"`
	Stall     struct {
		Pending  int64 `json:"pending"`
		Blockers []struct {
			PID int `json:"pid"`
		} `json:"blockers"`
	} `json:"stall"`
}

func (d *daemon) status() (status, error) {
	var s status
	return s, d.get("/v1/status", &s)
}

// metric sums the samples of a metric whose labels contain every given
// `name="value"` pair.
func (d *daemon) metric(name string, labels ...string) (float64, error) {
	code, b, err := d.request("GET", "/metrics", nil, nil)
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("metrics: %d", code)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum, nil
}
