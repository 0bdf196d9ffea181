package deploy

import (
	"os/exec"
	"testing"
)

// promtool runs promtool with args in deploy/prometheus; it fails the test
// with how to get promtool when it is missing: the rules are never left
// unchecked.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found on PATH: install it (Debian: apt-get install prometheus) to check deploy/prometheus/alerts.yaml")
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestAlertRulesCheck(t *testing.T) {
	t.Parallel()
	t.Log(promtool(t, "check", "rules", "alerts.yaml"))
}

func TestAlertRulesUnitTests(t *testing.T) {
	t.Parallel()
	t.Log(promtool(t, "test", "rules", "alerts_test.yaml"))
}

func TestPrometheusConfigExample(t *testing.T) {
	t.Parallel()
	// --syntax-only: the token file it names exists only where Prometheus runs.
	t.Log(promtool(t, "check", "config", "--syntax-only", "prometheus.yml"))
}
