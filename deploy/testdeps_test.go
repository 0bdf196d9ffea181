package deploy

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// testDeps runs scripts/test-deps.sh target as a user other than root
// (it installs only as root) with PATH holding just the tools in bin.
func testDeps(t *testing.T, bin, target string) (int, string) {
	t.Helper()
	for _, tool := range []string{"bash", "sh", "ls", "id"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	// A copy beside the tools: the checkout may not be readable by nobody.
	src, err := os.ReadFile("../scripts/test-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(bin, "test-deps.sh")
	if err := os.WriteFile(script, src, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(bin, "bash"), script, target}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("nobody"); err != nil {
			t.Fatalf("running as root without a nobody user: %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Fatal("running as root without runuser (util-linux): cannot run test-deps.sh unprivileged")
		}
		env, err := exec.LookPath("env")
		if err != nil {
			t.Fatal(err)
		}
		args = append([]string{runuser, "-u", "nobody", "--", env, "-i", "PATH=" + bin}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=" + bin}
	return proctest.Combined(t, cmd)
}

// make test fails at once naming the Debian packages of the tools it
// lacks when it cannot install them, and passes once they are there.
func TestTestDepsNameWhatIsMissing(t *testing.T) {
	t.Parallel()
	// Not t.TempDir(): its parent is private to this user.
	bin, err := os.MkdirTemp("", "reconciler-test-deps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	pg := filepath.Join(bin, "initdb")
	if err := os.WriteFile(pg, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out := testDeps(t, bin, "test")
	if code != 1 || !strings.Contains(out, "missing here: prometheus chromium") || !strings.Contains(out, "apt-get install prometheus chromium") {
		t.Fatalf("without promtool and chromium: %d %s", code, out)
	}
	code, out = testDeps(t, bin, "objectstack")
	if code != 1 || !strings.Contains(out, "redis-server nodejs npm") {
		t.Fatalf("objectstack without node: %d %s", code, out)
	}
	for _, tool := range []string{"promtool", "chromium"} {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := testDeps(t, bin, "test"); code != 0 || out != "" {
		t.Fatalf("with every tool: %d %s", code, out)
	}
}

// .ci/run installs nothing itself: the make targets do.
func TestCIRunOnlyCallsMake(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, "apt-get") || !strings.Contains(s, "\nmake test\n") {
		t.Fatalf(".ci/run installs packages or does not run make test:\n%s", s)
	}
}
