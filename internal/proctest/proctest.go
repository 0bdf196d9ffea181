package proctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// BuildReconciler builds ./cmd/reconciler (pkgDir is its path relative to
// the calling test's package) into a temporary directory and returns the
// binary's path and a function removing it. For TestMain. Under -race the
// binary is built with -race as well.
func BuildReconciler(pkgDir, version string) (string, func(), error) {
	return build(pkgDir, version, raceEnabled)
}

// BuildPlainReconciler is BuildReconciler without -race, for a test that
// measures the process as shipped (the race runtime multiplies its memory).
func BuildPlainReconciler(pkgDir, version string) (string, func(), error) {
	return build(pkgDir, version, false)
}

// Race reports whether the tests run with -race.
func Race() bool { return raceEnabled }

func build(pkgDir, version string, race bool) (string, func(), error) {
	dir, err := os.MkdirTemp("", "reconciler-bin-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "reconciler")
	args := []string{"build", "-ldflags", "-X main.versionOverride=" + version, "-o", bin}
	if race {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, pkgDir)...).CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build reconciler: %v\n%s", err, out)
	}
	return bin, func() { _ = os.RemoveAll(dir) }, nil
}

// Buffer collects a process's output for inspection while it runs. Wrote
// receives (without blocking the writer) after each write.
type Buffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	Wrote chan struct{}
}

// NewBuffer returns an empty Buffer.
func NewBuffer() *Buffer { return &Buffer{Wrote: make(chan struct{}, 1)} }

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.Wrote <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len returns how many bytes were written so far.
func (s *Buffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Eventually checks cond every tick until it holds, failing the test when
// within passes first; it returns how long it took.
func Eventually(t testing.TB, within, tick time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if cond() {
			return time.Since(start)
		}
		select {
		case <-ticker.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %s", what, within)
		}
	}
}

// FreePort returns a loopback TCP port nothing listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}

// FreeAddr returns a loopback address nothing listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// StartedAddr returns the status API address from the daemon's JSON log
// line "reconciler started", or "" while there is none yet.
func StartedAddr(logs string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l struct {
			Msg    string `json:"msg"`
			Status string `json:"status"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "reconciler started" {
			return l.Status
		}
	}
	return ""
}

// Open reports whether done is still open: a process whose wait closes
// done has not exited.
func Open(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Combined runs cmd to completion and returns its exit code and its
// combined output; an error other than a non-zero exit fails the test.
func Combined(t testing.TB, cmd *exec.Cmd) (code int, out string) {
	t.Helper()
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(b)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(b)
}

// CleanEnv is this process's environment without RECONCILER_ variables,
// which would otherwise configure the daemons under test.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECONCILER_") {
			env = append(env, kv)
		}
	}
	return env
}

// RunSuite is a TestMain body for suites that run the daemon: it builds
// the binary (into *binary), runs the tests, removes the binary and, when
// they passed, fails the suite on goroutines left behind. It returns the
// exit code for os.Exit.
func RunSuite(m *testing.M, pkgDir, version string, binary *string) int {
	bin, cleanup, err := BuildReconciler(pkgDir, version)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*binary = bin
	code := m.Run()
	cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	return code
}
