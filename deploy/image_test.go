package deploy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
)

// finalStage is the Dockerfile's last stage as the test needs it.
type finalStage struct {
	from       string
	copies     []string // COPY instructions' arguments
	user       string
	workdir    string
	entrypoint []string
	other      []string // any other instruction
}

func parseFinalStage(t *testing.T) finalStage {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st finalStage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			st = finalStage{from: args}
		case "COPY":
			st.copies = append(st.copies, args)
		case "USER":
			st.user = args
		case "WORKDIR":
			st.workdir = args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &st.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: not the exec form: %v", args, err)
			}
		case "EXPOSE", "ARG", "LABEL":
		default:
			st.other = append(st.other, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return st
}

// testPKI is a throwaway CA and a server certificate it signed for
// 127.0.0.1.
type testPKI struct {
	caPEM, certPEM, keyPEM []byte
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "reconciler test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// layOutImage builds the binary as the Dockerfile does and lays out the
// final stage's root with deploy/image/rootfs.sh; extraCA, if not nil, is
// appended to the bundle like a file of deploy/image/extra-ca.
func layOutImage(t *testing.T, bin string, extraCA []byte) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	args := []string{"image/rootfs.sh", root, bin, "/etc/ssl/certs/ca-certificates.crt"}
	if extraCA != nil {
		p := filepath.Join(t.TempDir(), "db-ca.crt")
		if err := os.WriteFile(p, extraCA, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	if out, err := exec.Command("sh", args...).CombinedOutput(); err != nil {
		t.Fatalf("rootfs.sh: %v\n%s", err, out)
	}
	return root
}

// TestImageRunsChrooted checks the Dockerfile's final stage (FROM
// scratch, non-root, exec-form entrypoint, nothing but the laid-out root),
// lays that root out in an empty directory with the same script and a
// binary built with the same flags, and runs the entrypoint chrooted into
// it as the image's user against a private PostgreSQL that accepts TCP
// only over TLS, with sslmode=verify-full: /readyz turns 200. The same
// root without the database's CA refuses the server's certificate.
func TestImageRunsChrooted(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test chroots into the image's root: run it as root (CI does)")
	}
	st := parseFinalStage(t)
	if st.from != "scratch" {
		t.Errorf("final stage FROM %q, want scratch", st.from)
	}
	if len(st.other) > 0 {
		t.Errorf("final stage has instructions the test does not reproduce: %q", st.other)
	}
	if !slices.Equal(st.entrypoint, []string{"/reconciler", "run"}) {
		t.Errorf("ENTRYPOINT %q", st.entrypoint)
	}
	if !slices.Equal(st.copies, []string{"--from=build /rootfs/ /", "--from=build --chown=65532:65532 /rootfs/var/lib/reconciler/ /var/lib/reconciler/"}) {
		t.Errorf("final stage copies %q: the test lays out /rootfs only", st.copies)
	}
	if st.user != "65532:65532" || st.workdir != "/var/lib/reconciler" {
		t.Fatalf("USER %q WORKDIR %q", st.user, st.workdir)
	}

	// The binary as the build stage makes it.
	bin := filepath.Join(t.TempDir(), "reconciler")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../cmd/reconciler")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary is not static (it has an ELF interpreter)")
		}
	}
	ef.Close()

	pki := newTestPKI(t)
	root := layOutImage(t, bin, pki.caPEM)
	// Exactly these files, and no shell.
	var files []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, "/"+rel)
		}
		return nil
	})
	slices.Sort(files)
	if want := []string{"/etc/group", "/etc/passwd", "/etc/ssl/certs/ca-certificates.crt", "/reconciler"}; !slices.Equal(files, want) {
		t.Errorf("image files %q, want %q", files, want)
	}

	cluster := testdb.NewCluster(t, testdb.WithTLS(pki.certPEM, pki.keyPEM))
	u, err := url.Parse(cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "verify-full")
	u.RawQuery = q.Encode()
	store := u.String()

	run := func(root string) *exec.Cmd {
		cmd := exec.Command(st.entrypoint[0], append(st.entrypoint[1:], "--migrate")...)
		cmd.Dir = st.workdir
		cmd.Env = []string{
			"RECONCILER_STORE_URL=" + store,
			"RECONCILER_STATUS_LISTEN=127.0.0.1:0",
			"RECONCILER_LOG_FORMAT=json",
			"RECONCILER_REPLICA_ID=chrooted",
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		return cmd
	}

	d := startProcess(t, run(root))
	proctest.Eventually(t, 60*time.Second, 100*time.Millisecond, "/readyz 200 in the chroot", func() bool {
		code, _ := d.get("/readyz")
		return code == http.StatusOK
	})
	if code, body := d.get("/v1/status"); code != http.StatusOK || !strings.Contains(body, `"store_up": true`) {
		t.Errorf("/v1/status: %d %s", code, body)
	}
	// The daemon wrote its drift directory in its state directory, as 65532.
	if fi, err := os.Stat(filepath.Join(root, "var/lib/reconciler/drift")); err != nil {
		t.Errorf("drift dir: %v", err)
	} else if s, ok := fi.Sys().(*syscall.Stat_t); ok && s.Uid != 65532 {
		t.Errorf("drift dir owned by %d, want 65532", s.Uid)
	}

	// Without the database's CA in the bundle, verify-full refuses the
	// server: the bundle is what the image verifies with.
	bare := layOutImage(t, bin, nil)
	cmd := run(bare)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the daemon started against an unknown CA:\n%s", out)
	}
	if !strings.Contains(string(out), "certificate") {
		t.Errorf("the failure does not name the certificate:\n%s", out)
	}
}
