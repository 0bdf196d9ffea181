//go:build objectstack

package objectstack

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// EnvModules names a variable that, when set, points at an installed
// node_modules of the pinned platform and skips the install script.
const EnvModules = "RECONCILER_OBJECTSTACK_MODULES"

var install struct {
	once    sync.Once
	modules string
	err     error
}

// Modules returns the node_modules directory of the pinned platform,
// installing it on first use with scripts/objectstack/install.sh (cached
// between runs), or fails the test saying how to fix the install.
func Modules(t testing.TB) string {
	t.Helper()
	install.once.Do(func() { install.modules, install.err = runInstall() })
	if install.err != nil {
		t.Fatalf("the pinned ObjectStack platform is not installed: %v\n"+
			"fix: install Node.js 20+ and npm, make sure the npm registry is reachable, then run "+
			"scripts/objectstack/install.sh (or set %s to an installed node_modules)", install.err, EnvModules)
	}
	return install.modules
}

// ProjectDir returns scripts/objectstack: the lockfile and the node's app.
func ProjectDir() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "scripts", "objectstack"), nil
}

func runInstall() (string, error) {
	if m := os.Getenv(EnvModules); m != "" {
		return checkModules(m)
	}
	dir, err := ProjectDir()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(dir, "install.sh"))
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/objectstack/install.sh: %w\n%s", err, tail(stderr.String(), 4000))
	}
	fmt.Fprint(os.Stderr, stderr.String())
	return checkModules(strings.TrimSpace(lastLine(stdout.String())))
}

func checkModules(m string) (string, error) {
	if _, err := os.Stat(filepath.Join(m, ".bin", "os")); err != nil {
		return "", fmt.Errorf("%s has no .bin/os (the @objectstack/cli binary): %w", m, err)
	}
	return m, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
