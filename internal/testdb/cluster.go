package testdb

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// Cluster is a private PostgreSQL server owned by one test, for tests that
// stop and start the server (store outages). It is removed when the test ends.
type Cluster struct {
	t    testing.TB
	dir  string
	port int
	user string
	bin  string
}

// NewCluster initdb's and starts a private cluster, failing the test with
// a clear message when the PostgreSQL binaries cannot be found.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "reconciler-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, dir: dir, bin: bin, user: currentUser()}
	if os.Geteuid() == 0 {
		if err := exec.Command("chown", "-R", "postgres", dir).Run(); err != nil {
			t.Fatalf("chown cluster dir: %v", err)
		}
		_ = os.Chmod(dir, 0o755)
	}
	c.port = freePort(t)
	t.Cleanup(func() {
		_ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	if err := c.run("initdb", "-D", c.data(), "-U", c.user, "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	c.Start()
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// URL returns the URL of database db on the cluster.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", c.user, c.port, db)
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off", c.port, c.dir)
	if err := c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		c.t.Fatalf("start cluster: %v\n%s", err, log)
	}
}

// Stop stops the server at once (connections are cut).
func (c *Cluster) Stop() {
	c.t.Helper()
	if err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop"); err != nil {
		c.t.Fatalf("stop cluster: %v", err)
	}
}

func (c *Cluster) run(name string, args ...string) error {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}

func pgBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin: install PostgreSQL (apt-get install postgresql)")
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "postgres"
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "postgres"
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	p, _ := strconv.Atoi(fmt.Sprint(l.Addr().(*net.TCPAddr).Port))
	return p
}
