package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// binary is the reconciler built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	os.Exit(proctest.RunSuite(m, ".", "e2e", &binary))
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

// reconciler runs the binary to completion in dir with extra env.
func reconciler(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append(proctest.CleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run reconciler %v: %v", args, err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// proc is a running `reconciler run`.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    *proctest.Buffer
	addr   string
	done   chan struct{}
	code   int
	token  string
	client *http.Client
	bodies *proctest.Buffer // every HTTP body the test received
}

type daemonOpts struct {
	dir   string
	env   []string
	args  []string
	token string
}

// startDaemon starts `reconciler run` with a status API on a free port and
// waits until it says it has started.
func startDaemon(t *testing.T, o daemonOpts) *proc {
	t.Helper()
	d := launchDaemon(t, o)
	d.waitStarted(60 * time.Second)
	return d
}

// launchDaemon starts `reconciler run` like startDaemon without waiting.
func launchDaemon(t *testing.T, o daemonOpts) *proc {
	t.Helper()
	args := append([]string{"run", "--status.listen", "127.0.0.1:0", "--log.format", "json"}, o.args...)
	cmd := exec.Command(binary, args...)
	cmd.Dir = o.dir
	cmd.Env = append(proctest.CleanEnv(), o.env...)
	out := proctest.NewBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &proc{t: t, cmd: cmd, out: out, done: make(chan struct{}), token: o.token,
		client: &http.Client{Timeout: 10 * time.Second}, bodies: proctest.NewBuffer()}
	go func() {
		err := cmd.Wait()
		d.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			d.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				d.code = -int(ws.Signal())
			}
		}
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Kill()
			<-d.done
		}
		d.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("daemon output:\n%s", out.String())
		}
	})
	return d
}

// waitStarted waits until the daemon logs that it has started.
func (d *proc) waitStarted(within time.Duration) {
	d.t.Helper()
	deadline := time.After(within)
	for {
		if addr := proctest.StartedAddr(d.out.String()); addr != "" {
			d.addr = addr
			return
		}
		select {
		case <-d.out.Wrote:
		case <-d.done:
			d.t.Fatalf("daemon exited with %d before starting:\n%s", d.code, d.out.String())
		case <-deadline:
			d.t.Fatalf("daemon did not start:\n%s", d.out.String())
		}
	}
}

func (d *proc) signal(s os.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(s); err != nil {
		d.t.Fatalf("signal %v: %v", s, err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (d *proc) wait(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.done:
		return d.code
	case <-time.After(timeout):
		d.t.Fatalf("daemon did not exit within %s:\n%s", timeout, d.out.String())
		return 0
	}
}

// get fetches path from the status API; the body is kept for the canary
// check.
func (d *proc) request(method, path string) (int, []byte) {
	d.t.Helper()
	req, err := http.NewRequest(method, "http://"+d.addr+path, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	_, _ = d.bodies.Write(b)
	return resp.StatusCode, b
}

type item struct {
	Kind            string `json:"kind"`
	Key             string `json:"key"`
	State           string `json:"state"`
	Reason          string `json:"reason"`
	Revision        int64  `json:"revision"`
	ServingRevision int64  `json:"serving_revision"`
}

func (d *proc) item(kind, key string) (item, bool) {
	d.t.Helper()
	code, body := d.request("GET", "/v1/items?kind="+kind)
	if code != 200 {
		d.t.Fatalf("items: %d %s", code, body)
	}
	var items []item
	if err := json.Unmarshal(body, &items); err != nil {
		d.t.Fatalf("items: %v: %s", err, body)
	}
	for _, it := range items {
		if it.Key == key {
			return it, true
		}
	}
	return item{}, false
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return proctest.Eventually(t, within, 25*time.Millisecond, what, cond)
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
