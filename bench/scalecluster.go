package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pgCluster is a private PostgreSQL cluster the scale bench starts (its
// own, so that max_connections, pg_stat_statements and a standby are
// under its control), removed by stop.
type pgCluster struct {
	dir, bin string
	port     int
	user     string
}

func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_basebackup")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_basebackup"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL binaries (initdb, pg_ctl, pg_basebackup) not found: apt-get install postgresql")
}

// asPG runs a command as the postgres user when root (PostgreSQL and
// PgBouncer refuse to run as root).
func asPG(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func newDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if os.Geteuid() == 0 {
		if err := exec.Command("chown", "postgres", dir).Run(); err != nil {
			return "", err
		}
		_ = os.Chmod(dir, 0o755)
	}
	return dir, nil
}

func userName() string {
	if os.Geteuid() == 0 {
		return "postgres"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "postgres"
}

// startPrimary initdb's and starts a cluster with room for maxConns
// backends and pg_stat_statements loaded.
func startPrimary(maxConns int) (*pgCluster, error) {
	return startPrimaryConf(maxConns, "shared_preload_libraries = 'pg_stat_statements'\n")
}

// startPrimaryConf is startPrimary with the settings extra instead of
// pg_stat_statements.
func startPrimaryConf(maxConns int, extra string) (*pgCluster, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	dir, err := newDir("reconciler-scale-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &pgCluster{dir: dir, bin: bin, port: port, user: userName()}
	if err := run(asPG(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", c.user, "-A", "trust", "--no-sync", "-E", "UTF8")); err != nil {
		c.remove()
		return nil, err
	}
	conf := fmt.Sprintf("max_connections = %d\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\nshared_buffers = 256MB\n", maxConns) + extra
	if err := appendFile(filepath.Join(c.data(), "postgresql.conf"), conf); err != nil {
		c.remove()
		return nil, err
	}
	if err := c.start(); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *pgCluster) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, c.dir)
	return run(asPG(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "120", "-o", opts, "start"))
}

// url is the superuser's URL of database db.
func (c *pgCluster) url(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", c.user, c.port, db)
}

// standby makes and starts a streaming hot standby of c.
func (c *pgCluster) standby() (*pgCluster, error) {
	dir, err := newDir("reconciler-scale-standby-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &pgCluster{dir: dir, bin: c.bin, port: port, user: c.user}
	if err := run(asPG(filepath.Join(c.bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", c.user,
		"-D", s.data(), "-R", "-X", "stream", "-c", "fast", "--no-sync")); err != nil {
		s.remove()
		return nil, err
	}
	if err := s.start(); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// remove stops the server and deletes its files.
func (c *pgCluster) remove() {
	_ = run(asPG(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", "immediate", "-w", "stop"))
	_ = os.RemoveAll(c.dir)
}

// postmaster returns the server's postmaster pid.
func (c *pgCluster) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// cpuNS returns the CPU time (ns, from /proc/PID/schedstat: exact, unlike
// the clock ticks of /proc/PID/stat) used so far by a process and its
// children, per pid.
func cpuNS(root int) map[int]int64 {
	out := map[int]int64{}
	family(root, func(pid int, _ procStat) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			out[pid] = ns
		}
	})
	return out
}

func nsDelta(before, after map[int]int64) time.Duration {
	var d int64
	for pid, a := range after {
		d += a - before[pid]
	}
	return time.Duration(d)
}

// pgBouncer is a PgBouncer in transaction pooling mode in front of a
// cluster, started by the bench (Debian's pgbouncer package).
type pgBouncer struct {
	dir  string
	port int
	cmd  *exec.Cmd
}

func startPgBouncer(ctx context.Context, target *pgCluster, poolSize int) (*pgBouncer, error) {
	path, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			return nil, errors.New("pgbouncer not found: scripts/bench.sh installs it (apt-get install pgbouncer)")
		}
		path = "/usr/sbin/pgbouncer"
	}
	dir, err := newDir("reconciler-scale-pgbouncer-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &pgBouncer{dir: dir, port: port}
	ini := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir = %s
auth_type = trust
auth_file = %s/users.txt
pool_mode = transaction
max_client_conn = 10000
default_pool_size = %d
ignore_startup_parameters = extra_float_digits
logfile = %s/pgbouncer.log
`, target.port, port, dir, dir, poolSize, dir)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", target.user)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	b.cmd = asPG("sh", "-c", "ulimit -n 20000 2>/dev/null || ulimit -n 4096; exec "+path+" "+filepath.Join(dir, "pgbouncer.ini"))
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return nil, fmt.Errorf("pgbouncer did not listen on %d: %v: %s", port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// url is database db through PgBouncer, in pgx's extended-protocol mode
// without named prepared statements (PgBouncer 1.18 in transaction mode
// cannot keep them).
func (b *pgBouncer) url(user, db, mode string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable&default_query_exec_mode=%s", user, b.port, db, mode)
}

// pid is the PgBouncer process (the child of runuser/sh when root).
func (b *pgBouncer) pid() int {
	root := b.cmd.Process.Pid
	// runuser → sh (exec'd into pgbouncer): find the pgbouncer process.
	for pid := range cpuNS(root) {
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.HasPrefix(string(cmdline), "pgbouncer") {
			return pid
		}
	}
	return root
}

func (b *pgBouncer) stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		if p := b.pid(); p != b.cmd.Process.Pid {
			_ = exec.Command("kill", strconv.Itoa(p)).Run()
		}
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
	}
	_ = os.RemoveAll(b.dir)
}
