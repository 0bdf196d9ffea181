package deploy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// binary is the reconciler built for this suite.
var binary string

func TestMain(m *testing.M) {
	os.Exit(proctest.RunSuite(m, "../cmd/reconciler", "deploy-test", &binary))
}

// buildDemoTool builds scripts/demo once.
var buildDemoTool = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reconciler-demo-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "reconciler-demo")
	if out, err := exec.Command("go", "build", "-o", bin, "../scripts/demo").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build demo tool: %v\n%s", err, out)
	}
	return bin, nil
})

// proc is one `reconciler run` process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *proctest.Buffer
	done chan struct{}
	addr string
}

// startDaemon runs `reconciler run` (binary bin, in dir, with args after
// the status and log flags) and waits until it has started.
func startDaemon(t *testing.T, bin, dir string, env []string, args ...string) *proc {
	t.Helper()
	all := append([]string{"run", "--status.listen", "127.0.0.1:0", "--log.format", "json"}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Dir = dir
	cmd.Env = append(proctest.CleanEnv(), env...)
	return startProcess(t, cmd)
}

// startProcess starts cmd, a daemon logging JSON, and waits until it says
// it has started.
func startProcess(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	d := &proc{t: t, cmd: cmd, out: proctest.NewBuffer(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("daemon output:\n%s", d.out.String())
		}
	})
	deadline := time.After(60 * time.Second)
	for d.addr == "" {
		d.addr = proctest.StartedAddr(d.out.String())
		if d.addr != "" {
			break
		}
		select {
		case <-d.out.Wrote:
		case <-d.done:
			t.Fatalf("daemon exited before starting:\n%s", d.out.String())
		case <-deadline:
			t.Fatalf("daemon did not start:\n%s", d.out.String())
		}
	}
	return d
}

// get fetches path from the daemon's status API with the given headers.
func (d *proc) get(path string, header ...string) (int, string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+path, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// demo is the `make run` demo laid out in a temporary directory: its store
// seeded, its upstream running, the daemon running on it.
type demo struct {
	dir string
	d   *proc
}

// startDemo seeds the demo (the connector crm held: upstream refuses its
// credential) and runs the daemon on it, with extra env and args.
func startDemo(t *testing.T, env []string, args ...string) *demo {
	t.Helper()
	tool, err := buildDemoTool()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "reconciler.db")
	upstream := proctest.FreeAddr(t)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(binary, args...).CombinedOutput(); err != nil {
			t.Fatalf("reconciler %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("migrate", "--store.url", "sqlite://"+store)
	seed := exec.Command(tool, "seed", "-store", store, "-upstream", "http://"+upstream, "-datasource", filepath.Join(dir, "crm.db"))
	if out, err := seed.CombinedOutput(); err != nil {
		t.Fatalf("seed the demo: %v\n%s", err, out)
	}
	up := exec.Command(tool, "upstream", "-listen", upstream)
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Kill()
		_ = up.Wait()
	})
	all := append([]string{"--store.url", "sqlite://" + store, "--drift.dir", filepath.Join(dir, "drift"),
		"--replica_id", "demo", "--datasource.sqlite_dir", dir, "--engine.code_objects", "users",
		"--poll.interval", "200ms"}, args...)
	return &demo{dir: dir, d: startDaemon(t, binary, dir, env, all...)}
}

// waitReady waits until /readyz answers 200.
func (d *proc) waitReady(within time.Duration) {
	d.t.Helper()
	proctest.Eventually(d.t, within, 50*time.Millisecond, "/readyz 200", func() bool {
		code, _ := d.get("/readyz")
		return code == http.StatusOK
	})
}
