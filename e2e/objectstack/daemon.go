//go:build objectstack

package objectstack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// Item is one entry of the daemon's `GET /v1/items`.
type Item struct {
	Kind            string          `json:"kind"`
	Key             string          `json:"key"`
	Org             string          `json:"org"`
	Type            string          `json:"type"`
	Name            string          `json:"name"`
	Package         string          `json:"package"`
	Revision        int64           `json:"revision"`
	Signature       string          `json:"signature"`
	State           string          `json:"state"`
	Reason          string          `json:"reason"`
	ServingRevision int64           `json:"serving_revision"`
	Replica         json.RawMessage `json:"replica,omitempty"`
}

// Reconcile runs `reconciler <args>` to completion and returns its
// combined output, failing the test unless it exits 0.
func Reconcile(t testing.TB, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(proctest.CleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reconciler %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Daemon is a `reconciler run` process beside a node, its status API on a
// free loopback port and its output captured. It is stopped when the test
// ends (its output printed when the test failed).
type Daemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	done   chan struct{}
	out    *proctest.Buffer
	Status string // the status API's base URL
	code   int
}

// StartDaemon runs `reconciler run --status.listen <free> --log.format json
// <args>` with env added to a clean environment.
func StartDaemon(t testing.TB, bin string, env []string, args ...string) *Daemon {
	t.Helper()
	addr := proctest.FreeAddr(t)
	d := &Daemon{t: t, out: proctest.NewBuffer(), Status: "http://" + addr, done: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"run", "--status.listen", addr, "--log.format", "json"}, args...)...)
	d.cmd.Env = append(proctest.CleanEnv(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start reconciler run: %v", err)
	}
	go func() {
		_ = d.cmd.Wait()
		d.code = d.cmd.ProcessState.ExitCode()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("reconciler output (tail):\n%s", tail(d.out.String(), 12000))
		}
	})
	return d
}

// Output returns everything the daemon printed so far.
func (d *Daemon) Output() string { return d.out.String() }

// Stop sends SIGTERM and returns the exit code (the daemon exits within
// 5 s; it is killed after 15 s).
func (d *Daemon) Stop() int {
	d.t.Helper()
	return d.stop()
}

func (d *Daemon) stop() int {
	select {
	case <-d.done:
		return d.code
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		d.t.Errorf("reconciler did not exit within 15s of SIGTERM")
	}
	return d.code
}

// Get returns the body of a GET on the status API.
func (d *Daemon) Get(path string) (int, []byte, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(d.Status + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Items reads `GET /v1/items`.
func (d *Daemon) Items() ([]Item, error) {
	select {
	case <-d.done:
		return nil, fmt.Errorf("reconciler exited with %d", d.code)
	default:
	}
	status, body, err := d.Get("/v1/items")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("/v1/items answered %d: %s", status, body)
	}
	var items []Item
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, fmt.Errorf("decode /v1/items: %w: %s", err, tail(string(body), 2000))
	}
	return items, nil
}

// WaitItems polls /v1/items until cond holds for them, failing the test
// with the last items and the reason cond gave when it does not within
// the bound.
func (d *Daemon) WaitItems(within time.Duration, what string, cond func([]Item) error) []Item {
	d.t.Helper()
	var last []Item
	err := poll(within, 200*time.Millisecond, d.done, func() error {
		items, err := d.Items()
		if err != nil {
			return err
		}
		last = items
		return cond(items)
	})
	if err != nil {
		b, _ := json.MarshalIndent(last, "", "  ")
		d.t.Fatalf("%s: %v\nitems:\n%s", what, err, b)
	}
	return last
}

// FindItem returns the item of kind and key, or nil.
func FindItem(items []Item, kind, key string) *Item {
	for i := range items {
		if items[i].Kind == kind && items[i].Key == key {
			return &items[i]
		}
	}
	return nil
}
