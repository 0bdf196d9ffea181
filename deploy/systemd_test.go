package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/daemon"
)

// unitFile is a parsed systemd unit: section → key → values in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not KEY=VALUE in a section: %q", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u unitFile) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnit checks the unit's hardening and lifecycle directives, and
// has systemd-analyze verify it (with ExecStart pointing at a real binary)
// where systemd is installed.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, "systemd/reconciler.service")
	for _, c := range []struct{ section, key, want string }{
		{"Service", "DynamicUser", "yes"},
		{"Service", "ProtectSystem", "strict"},
		{"Service", "NoNewPrivileges", "yes"},
		{"Service", "StateDirectory", "reconciler"},
		{"Service", "LogsDirectory", "reconciler"},
		{"Service", "Restart", "on-failure"},
		{"Service", "ExecReload", "/bin/kill -HUP $MAINPID"},
		{"Service", "ExecStart", "/usr/local/bin/reconciler run"},
		{"Service", "EnvironmentFile", "/etc/reconciler/reconciler.env"},
		{"Service", "ProtectHome", "yes"},
		{"Service", "PrivateTmp", "yes"},
		{"Service", "CapabilityBoundingSet", ""},
		{"Install", "WantedBy", "multi-user.target"},
	} {
		if _, ok := u[c.section][c.key]; !ok {
			t.Errorf("[%s] %s is missing", c.section, c.key)
		} else if got := u.last(c.section, c.key); got != c.want {
			t.Errorf("[%s] %s=%q, want %q", c.section, c.key, got, c.want)
		}
	}
	stop, err := time.ParseDuration(u.last("Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	if stop <= daemon.StopTimeout {
		t.Errorf("TimeoutStopSec=%s does not leave the daemon its stop bound (%s)", stop, daemon.StopTimeout)
	}

	// The env file example: KEY=VALUE lines, the store URL without a
	// password, the token by indirection.
	env, err := os.ReadFile("systemd/reconciler.env")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(env), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("reconciler.env: not KEY=VALUE: %q", line)
		}
		vars[k] = v
	}
	if url := vars["RECONCILER_STORE_URL"]; !strings.Contains(url, "sslmode=verify-full") || strings.Contains(strings.SplitN(url, "@", 2)[0], ":change") {
		t.Errorf("reconciler.env: RECONCILER_STORE_URL=%q: want verify-full and no password in the URL", url)
	}
	if tok := vars["RECONCILER_STATUS_TOKEN_ENV"]; tok == "" || vars[tok] == "" {
		t.Errorf("reconciler.env: the status token is not set through RECONCILER_STATUS_TOKEN_ENV")
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: checked by parsing only")
		return
	}
	// verify checks that ExecStart's binary exists: point it at this
	// suite's build. Any warning (an unknown key, a bad value) fails.
	unit, err := os.ReadFile("systemd/reconciler.service")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "reconciler.service")
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/reconciler", "ExecStart="+binary, 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
