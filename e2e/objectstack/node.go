//go:build objectstack

package objectstack

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
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

// Bounds of a node's life cycle.
const (
	// ReadyTimeout bounds a boot: `/api/v1/ready` answers 200 after
	// 10–15 s on an idle machine, 40 s and more on a first boot (it
	// creates its schema) of a busy one.
	ReadyTimeout = 120 * time.Second
	// StopTimeout bounds a graceful stop before the node is killed.
	StopTimeout = 20 * time.Second
)

// Node is one `os serve` process of a Stack, serving the app in
// scripts/objectstack from its own directory on its own port, with its
// output captured to a log file. It is stopped when the test ends, and its
// log's tail is printed when the test failed.
type Node struct {
	// Name tells the node apart in messages ("a", "b").
	Name string
	// Dir is the node's working directory (its app and local storage).
	Dir string
	// Port is the node's HTTP port on 127.0.0.1.
	Port int

	stack    *Stack
	noBus    bool // started without the cluster bus
	logPath  string
	bootTime time.Duration

	// mu guards what a supervisor changes while the test reads it.
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts []int64 // log offset at each start
	sup    *supervisor
}

// StartNode boots a new node of the stack and waits until it is ready. The
// first node of a stack also signs up the platform admin.
func (s *Stack) StartNode(name string) *Node {
	s.t.Helper()
	return s.startNode(name, false)
}

// StartNodeWithoutBus boots a node of the stack started without the
// cluster bus (no OS_CLUSTER_DRIVER: an in-process bus), as a node
// misconfigured so: it applies no lane message.
func (s *Stack) StartNodeWithoutBus(name string) *Node {
	s.t.Helper()
	return s.startNode(name, true)
}

func (s *Stack) startNode(name string, noBus bool) *Node {
	s.t.Helper()
	dir := s.t.TempDir()
	if err := layoutApp(dir, s.Modules); err != nil {
		s.t.Fatalf("lay out node %s: %v", name, err)
	}
	_, port, _ := net.SplitHostPort(proctest.FreeAddr(s.t))
	n := &Node{Name: name, Dir: dir, stack: s, logPath: filepath.Join(dir, "node.log"), noBus: noBus}
	fmt.Sscan(port, &n.Port)
	s.nodes++
	s.t.Cleanup(func() {
		n.stop()
		if s.t.Failed() {
			s.t.Logf("node %s log (tail, full log was %s):\n%s", n.Name, n.logPath, tail(n.Log(), 12000))
		}
	})
	n.Start()
	if s.token == "" {
		s.token = n.signUp()
	}
	return n
}

// layoutApp puts the test app (objectstack.config.ts, package.json) in dir
// and links the installed node_modules beside it.
func layoutApp(dir, modules string) error {
	proj, err := ProjectDir()
	if err != nil {
		return err
	}
	for _, f := range []string{"objectstack.config.ts", "package.json"} {
		b, err := os.ReadFile(filepath.Join(proj, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	return os.Symlink(modules, filepath.Join(dir, "node_modules"))
}

// BaseURL returns http://127.0.0.1:<port>.
func (n *Node) BaseURL() string { return fmt.Sprintf("http://127.0.0.1:%d", n.Port) }

// API returns a client of the node authenticated as the platform admin.
func (n *Node) API() *Client { return NewClient(n.BaseURL(), n.stack.token) }

// BootTime returns how long the last start took until ready.
func (n *Node) BootTime() time.Duration { return n.bootTime }

// Start starts the node (again, after Stop) on its port and waits until
// `/api/v1/ready` answers 200, failing the test with the log's tail when
// it exits or is not ready within ReadyTimeout.
func (n *Node) Start() {
	t := n.stack.t
	t.Helper()
	n.mu.Lock()
	running := n.cmd != nil
	n.mu.Unlock()
	if running {
		t.Fatalf("node %s is already running", n.Name)
	}
	start := time.Now()
	n.mu.Lock()
	err := n.spawnLocked()
	done := n.done
	n.mu.Unlock()
	if err != nil {
		t.Fatalf("start node %s: %v", n.Name, err)
	}
	err = poll(ReadyTimeout, 250*time.Millisecond, done, func() error {
		status, _, err := get(n.BaseURL() + "/api/v1/ready")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("/api/v1/ready answered %d", status)
		}
		return err
	})
	if err != nil {
		t.Fatalf("node %s is not ready: %v\nlog tail:\n%s", n.Name, err, tail(n.CurrentLog(), 8000))
	}
	n.bootTime = time.Since(start)
	t.Logf("node %s ready on port %d after %s", n.Name, n.Port, n.bootTime.Round(100*time.Millisecond))
}

// spawnLocked starts the node's process, its output appended to the log,
// and writes its process group id to PIDFile. n.mu is held.
func (n *Node) spawnLocked() error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	off, _ := logf.Seek(0, io.SeekEnd)
	n.starts = append(n.starts, off)
	fmt.Fprintf(logf, "=== e2e: start %d of node %s on port %d at %s ===\n", len(n.starts), n.Name, n.Port, time.Now().UTC().Format(time.RFC3339Nano))

	s := n.stack
	cmd := exec.Command(filepath.Join(s.Modules, ".bin", "os"), "serve", "-p", fmt.Sprint(n.Port),
		"--no-console", "--no-ui", "--log-level", s.LogLevel)
	cmd.Dir = n.Dir
	cmd.Env = append(nodeEnv(),
		"OS_DATABASE_URL="+s.DatabaseURL,
		"OS_AUTH_SECRET="+s.AuthSecret,
		"OS_SECRET_KEY="+s.SecretKey,
		"NO_COLOR=1",
	)
	if !n.noBus {
		cmd.Env = append(cmd.Env, "OS_CLUSTER_DRIVER=redis", "OS_REDIS_URL="+s.Redis.URL())
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	return os.WriteFile(n.PIDFile(), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644)
}

// PIDFile is where the node's current process group id is written at
// each start (for a restart command to signal).
func (n *Node) PIDFile() string { return filepath.Join(n.Dir, "node.pid") }

// supervisor starts a node again whenever its process exits.
type supervisor struct {
	quit     chan struct{}
	finished chan struct{}
	restarts int   // starts after an exit
	err      error // why it gave up
}

// Supervise has the node started again whenever its process exits, as
// systemd's Restart=always or a kubelet would, until Stop or the test's
// end. Restarts counts those starts.
func (n *Node) Supervise() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sup != nil || n.cmd == nil {
		n.stack.t.Fatalf("node %s: supervise a running, unsupervised node", n.Name)
	}
	sup := &supervisor{quit: make(chan struct{}), finished: make(chan struct{})}
	n.sup = sup
	go func() {
		defer close(sup.finished)
		for {
			n.mu.Lock()
			done := n.done
			n.mu.Unlock()
			select {
			case <-sup.quit:
				return
			case <-done:
			}
			n.mu.Lock()
			select {
			case <-sup.quit:
				n.mu.Unlock()
				return
			default:
			}
			// Children that outlived the leader.
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			sup.restarts++
			err := n.spawnLocked()
			n.mu.Unlock()
			if err != nil {
				sup.err = err
				return
			}
		}
	}()
}

// Restarts returns how many times the supervisor started the node again,
// and why it gave up ("" while it supervises).
func (n *Node) Restarts() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sup == nil {
		return 0, nil
	}
	return n.sup.restarts, n.sup.err
}

// Stop stops the node gracefully (SIGTERM to its process group), killing
// it after StopTimeout.
func (n *Node) Stop() {
	n.stack.t.Helper()
	if n.cmd == nil {
		n.stack.t.Fatalf("node %s is not running", n.Name)
	}
	n.stop()
}

// Restart stops and starts the node.
func (n *Node) Restart() {
	n.stack.t.Helper()
	n.Stop()
	n.Start()
}

// Running tells whether the node's process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && proctest.Open(n.done)
}

func (n *Node) stop() {
	n.mu.Lock()
	sup := n.sup
	n.sup = nil
	n.mu.Unlock()
	if sup != nil {
		close(sup.quit)
		<-sup.finished
	}
	if n.cmd == nil {
		return
	}
	pgid := n.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(StopTimeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-n.done
	}
	// Children that outlived the leader.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	n.cmd = nil
}

// Log returns the node's whole log, over all its starts.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// CurrentLog returns the log of the node's latest start.
func (n *Node) CurrentLog() string {
	l := n.Log()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.starts) > 0 && int(n.starts[len(n.starts)-1]) <= len(l) {
		return l[n.starts[len(n.starts)-1]:]
	}
	return l
}

// Health is the node's anonymous `/api/v1/health` answer.
type Health struct {
	Status    string  `json:"status"`
	Timestamp string  `json:"timestamp"`
	Version   string  `json:"version"`
	Uptime    float64 `json:"uptime"`
}

// Health reads `/api/v1/health`; uptime going down means a restart.
func (n *Node) Health() (Health, error) {
	status, body, err := get(n.BaseURL() + "/api/v1/health")
	if err != nil {
		return Health{}, err
	}
	var env struct {
		Success bool   `json:"success"`
		Data    Health `json:"data"`
	}
	if status != http.StatusOK {
		return Health{}, fmt.Errorf("health answered %d: %s", status, body)
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return Health{}, fmt.Errorf("decode health %s: %w", body, err)
	}
	return env.Data, nil
}

func (n *Node) signUp() string {
	t := n.stack.t
	t.Helper()
	resp, err := NewClient(n.BaseURL(), "").Do("POST", "/api/v1/auth/sign-up/email",
		map[string]string{"email": AdminEmail, "password": AdminPassword, "name": "E2E Admin"})
	if err != nil {
		t.Fatalf("sign up on node %s: %v", n.Name, err)
	}
	var out struct {
		Token string `json:"token"`
	}
	if resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &out) != nil || out.Token == "" {
		t.Fatalf("sign up on node %s: %d %s", n.Name, resp.Status, resp.Body)
	}
	return out.Token
}

// nodeEnv is this process's environment without the variables that would
// configure the reconciler or the node under test.
func nodeEnv() []string {
	var env []string
	for _, kv := range proctest.CleanEnv() {
		if !strings.HasPrefix(kv, "OS_") {
			env = append(env, kv)
		}
	}
	return env
}

func get(url string) (int, []byte, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// MigratePlan is the platform's own drift check of the database
// (`os migrate plan --json`, a dry run).
type MigratePlan struct {
	Total           int               `json:"total"`
	Changes         []json.RawMessage `json:"changes"`
	Pending         []json.RawMessage `json:"pending"`
	UnmanagedTables struct {
		Tables []struct {
			Table string `json:"table"`
		} `json:"tables"`
	} `json:"unmanagedTables"`
}

// MigratePlan runs `os migrate plan --json` on the stack's database from
// the node's directory: how the platform sees the database drifting from
// its metadata. It changes nothing.
func (n *Node) MigratePlan() (MigratePlan, error) {
	s := n.stack
	cmd := exec.Command(filepath.Join(s.Modules, ".bin", "os"), "migrate", "plan", "--json")
	cmd.Dir = n.Dir
	cmd.Env = append(nodeEnv(), "OS_DATABASE_URL="+s.DatabaseURL, "OS_AUTH_SECRET="+s.AuthSecret,
		"OS_SECRET_KEY="+s.SecretKey, "NO_COLOR=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return MigratePlan{}, fmt.Errorf("os migrate plan: %w\n%s", err, tail(stderr.String(), 4000))
	}
	var p MigratePlan
	if err := json.Unmarshal(out, &p); err != nil {
		return p, fmt.Errorf("decode os migrate plan --json: %w: %s", err, tail(string(out), 2000))
	}
	return p, nil
}
