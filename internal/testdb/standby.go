package testdb

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// NewStandby makes a hot standby of c that streams from it
// (`pg_basebackup -R`: a fast checkpoint, WAL streamed during the copy)
// and starts it. It is removed when the test ends.
func (c *Cluster) NewStandby(t testing.TB) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "reconciler-standby-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Cluster{t: t, dir: dir, bin: toolDir(c.bin, "pg_basebackup"), user: c.user}
	if os.Geteuid() == 0 {
		if err := exec.Command("chown", "-R", "postgres", dir).Run(); err != nil {
			t.Fatalf("chown standby dir: %v", err)
		}
		_ = os.Chmod(dir, 0o755)
	}
	s.port = proctest.FreePort(t)
	t.Cleanup(func() {
		_ = s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	if err := s.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", c.user, "-D", s.data(),
		"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("pg_basebackup: %v", err)
	}
	s.Start()
	return s
}

// Promote ends the standby's recovery: it becomes a primary.
func (c *Cluster) Promote() {
	c.t.Helper()
	if err := c.run("pg_ctl", "-D", c.data(), "-w", "promote"); err != nil {
		c.t.Fatalf("promote: %v", err)
	}
}

// toolDir is the directory holding tool: dir when it has it, else the
// newest /usr/lib/postgresql/*/bin that does (pg_ctl may be on PATH alone).
func toolDir(dir, tool string) string {
	if _, err := os.Stat(filepath.Join(dir, tool)); err == nil {
		return dir
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, tool)); err == nil {
			return d
		}
	}
	return dir
}
