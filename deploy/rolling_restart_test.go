package deploy

import (
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// rrContainer and rrDoc are the parts of the rendered rolling-restart
// overlay the test asserts.
type rrContainer struct {
	Name string `yaml:"name"`
	Env  []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	LivenessProbe *struct {
		Exec *struct {
			Command []string `yaml:"command"`
		} `yaml:"exec"`
		HTTPGet          any `yaml:"httpGet"`
		FailureThreshold int `yaml:"failureThreshold"`
		PeriodSeconds    int `yaml:"periodSeconds"`
	} `yaml:"livenessProbe"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func (c rrContainer) env(name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mount returns the volume mounted at dir ("" for none).
func (c rrContainer) mount(dir string) string {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) == path.Clean(dir) {
			return m.Name
		}
	}
	return ""
}

type rrDoc struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Template struct {
			Spec struct {
				InitContainers []rrContainer `yaml:"initContainers"`
				Containers     []rrContainer `yaml:"containers"`
				Volumes        []struct {
					Name     string `yaml:"name"`
					EmptyDir any    `yaml:"emptyDir"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesRollingRestart renders deploy/kubernetes/rolling-restart and
// checks the way it restarts the replica container from the sidecar: the
// sidecar's restart command writes a file into an emptyDir both containers
// mount, and the replica container's exec livenessProbe fails (once) while
// it exists. No RBAC object is rendered, the status API is not asked, and
// both commands are run for real: the sidecar's request, then the probe
// (fails and removes the request, then passes).
func TestKubernetesRollingRestart(t *testing.T) {
	t.Parallel()
	docs, out := kustomize[rrDoc](t, "kubernetes/rolling-restart")
	var deploy *rrDoc
	for i := range docs {
		switch d := &docs[i]; d.Kind {
		case "Deployment":
			deploy = d
		case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ServiceAccount":
			t.Errorf("the overlay renders a %s: restarts need no rights on the cluster", d.Kind)
		}
	}
	if deploy == nil {
		t.Fatalf("no Deployment rendered:\n%s", out)
	}
	pod := deploy.Spec.Template.Spec
	var sc, replica *rrContainer
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "reconciler" {
			sc = &pod.InitContainers[i]
		}
	}
	for i := range pod.Containers {
		if pod.Containers[i].Name == "objectstack" {
			replica = &pod.Containers[i]
		}
	}
	if sc == nil || replica == nil {
		t.Fatalf("sidecar %v, replica container %v", sc, replica)
	}

	// The sidecar's command: a string argv (split on white space, as the
	// config decodes it), `reconciler request-restart FILE`.
	argv := strings.Fields(sc.env("RECONCILER_REPLICA_RESTART_COMMAND"))
	if len(argv) != 3 || argv[0] != "/reconciler" || argv[1] != "request-restart" || !path.IsAbs(argv[2]) {
		t.Fatalf("restart command %q, want /reconciler request-restart /ABS/FILE", argv)
	}
	file := argv[2]
	dir := path.Dir(file)
	vol := sc.mount(dir)
	if vol == "" || replica.mount(dir) != vol {
		t.Fatalf("%s: sidecar mounts %q there, replica container %q: want one volume in both", dir, vol, replica.mount(dir))
	}
	emptyDir := false
	for _, v := range pod.Volumes {
		if v.Name == vol && v.EmptyDir != nil {
			emptyDir = true
		}
	}
	if !emptyDir {
		t.Errorf("volume %s is not an emptyDir", vol)
	}
	for _, k := range []string{"RECONCILER_REPLICA_RESTART_AFTER", "RECONCILER_REPLICA_RESTART_MIN_INTERVAL", "RECONCILER_REPLICA_RESTART_LEASE_TIMEOUT"} {
		if sc.env(k) == "" {
			t.Errorf("%s is not set (the overlay states its bounds)", k)
		}
	}

	lp := replica.LivenessProbe
	if lp == nil || lp.Exec == nil || lp.HTTPGet != nil || len(lp.Exec.Command) == 0 {
		t.Fatalf("replica container's livenessProbe %+v: want an exec probe", lp)
	}
	if lp.FailureThreshold != 1 {
		t.Errorf("livenessProbe failureThreshold %d, want 1 (it fails once per request)", lp.FailureThreshold)
	}
	probe := strings.Join(lp.Exec.Command, " ")
	if strings.Contains(probe, "9477") || strings.Contains(probe, "/v1/") {
		t.Errorf("the probe asks the sidecar's status API: %q", probe)
	}

	// Run both for real, with the volume's path moved into a temporary
	// directory: no request, the probe passes; the sidecar's command
	// requests; the probe fails once, removing it; then passes again.
	tmp := t.TempDir()
	local := filepath.Join(tmp, filepath.Base(file))
	probeArgv := make([]string, len(lp.Exec.Command))
	for i, a := range lp.Exec.Command {
		probeArgv[i] = strings.ReplaceAll(a, dir, tmp)
	}
	runProbe := func() int {
		t.Helper()
		err := exec.Command(probeArgv[0], probeArgv[1:]...).Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		t.Fatalf("run the probe %q: %v", probeArgv, err)
		return -1
	}
	if code := runProbe(); code != 0 {
		t.Fatalf("probe without a request exits %d, want 0", code)
	}
	if out, err := exec.Command(binary, "request-restart", local).CombinedOutput(); err != nil {
		t.Fatalf("reconciler request-restart: %v\n%s", err, out)
	}
	if code := runProbe(); code == 0 {
		t.Fatal("probe passes while a restart is requested")
	}
	if _, err := os.Stat(local); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failing probe left the request (%v): the container would restart again and again", err)
	}
	if code := runProbe(); code != 0 {
		t.Fatalf("probe after the restart exits %d, want 0", code)
	}
}
