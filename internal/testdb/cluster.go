package testdb

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// Cluster is a private PostgreSQL server owned by one test, for tests that
// stop and start the server (store outages) or need password
// authentication. It is removed when the test ends.
type Cluster struct {
	t        testing.TB
	dir      string
	port     int
	user     string
	bin      string
	password bool
	tlsCert  []byte // PEM; with tlsKey: ssl=on, TCP only over TLS
	tlsKey   []byte
}

// ClusterOption configures NewCluster.
type ClusterOption func(*Cluster)

// WithPasswordAuth makes TCP connections require a scram-sha-256 password,
// while the superuser connects without one over the unix socket (URL
// returns a socket URL). Tests create roles with passwords through URL and
// reach them over TCP with TCPURL.
func WithPasswordAuth() ClusterOption { return func(c *Cluster) { c.password = true } }

// WithTLS turns ssl on with the PEM certificate (chain) and key, and makes
// TCP connections require TLS (hostnossl is rejected); the unix socket
// stays plain.
func WithTLS(certPEM, keyPEM []byte) ClusterOption {
	return func(c *Cluster) { c.tlsCert, c.tlsKey = certPEM, keyPEM }
}

// NewCluster initdb's and starts a private cluster, failing the test with
// a clear message when the PostgreSQL binaries cannot be found.
func NewCluster(t testing.TB, opts ...ClusterOption) *Cluster {
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
	for _, o := range opts {
		o(c)
	}
	if os.Geteuid() == 0 {
		if err := exec.Command("chown", "-R", "postgres", dir).Run(); err != nil {
			t.Fatalf("chown cluster dir: %v", err)
		}
		_ = os.Chmod(dir, 0o755)
	}
	c.port = proctest.FreePort(t)
	t.Cleanup(func() {
		_ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	auth := []string{"-A", "trust"}
	if c.password {
		auth = []string{"--auth-host=scram-sha-256", "--auth-local=trust"}
	}
	if err := c.run("initdb", append([]string{"-D", c.data(), "-U", c.user, "--no-sync", "-E", "UTF8"}, auth...)...); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	if c.tlsCert != nil {
		c.setupTLS()
	}
	c.Start()
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// URL returns the superuser's URL of database db on the cluster: over
// TCP, or over the unix socket for a cluster WithPasswordAuth.
func (c *Cluster) URL(db string) string {
	if c.password {
		return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", c.user, db, url.QueryEscape(c.dir), c.port)
	}
	return c.TCPURL(c.user, db)
}

// TCPURL returns the URL, without a password, of database db for role
// user over TCP.
func (c *Cluster) TCPURL(user, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", url.PathEscape(user), c.port, db)
}

// Port returns the cluster's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off", c.port, c.dir)
	if c.tlsCert != nil {
		opts += " -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key"
	}
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

// setupTLS writes the server's certificate and key into the data
// directory (the key readable by the server's user only) and a pg_hba.conf
// that admits TCP connections over TLS only.
func (c *Cluster) setupTLS() {
	c.t.Helper()
	auth := "trust"
	if c.password {
		auth = "scram-sha-256"
	}
	hba := "local all all trust\nhostssl all all 127.0.0.1/32 " + auth + "\nhostnossl all all 0.0.0.0/0 reject\n"
	for name, b := range map[string][]byte{"server.crt": c.tlsCert, "server.key": c.tlsKey, "pg_hba.conf": []byte(hba)} {
		path := filepath.Join(c.data(), name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			c.t.Fatalf("write %s: %v", name, err)
		}
		if os.Geteuid() == 0 {
			if err := exec.Command("chown", "postgres", path).Run(); err != nil {
				c.t.Fatalf("chown %s: %v", name, err)
			}
		}
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
