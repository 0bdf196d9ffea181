package deploy

import (
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/daemon"
)

// k8sProbe, k8sContainer and k8sDoc are the parts of the rendered
// manifests the test asserts.
type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sEnv struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom struct {
		SecretKeyRef struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
		ResourceFieldRef struct {
			Resource string `yaml:"resource"`
		} `yaml:"resourceFieldRef"`
	} `yaml:"valueFrom"`
}

type k8sContainer struct {
	Name           string    `yaml:"name"`
	Image          string    `yaml:"image"`
	RestartPolicy  string    `yaml:"restartPolicy"`
	Env            []k8sEnv  `yaml:"env"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	Ports          []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		RunAsUser                int   `yaml:"runAsUser"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
}

type k8sDoc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
				InitContainers                []k8sContainer `yaml:"initContainers"`
				Containers                    []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesKustomize renders deploy/kubernetes/base with `kubectl
// kustomize` and checks the sidecar: native (an init container with
// restartPolicy Always), probes, resources, secrets from the generated
// Secret, a grace period above the daemon's stop bound, scrape annotations.
func TestKubernetesKustomize(t *testing.T) {
	t.Parallel()
	docs, out := kustomize[k8sDoc](t, "kubernetes/base")
	var deploy *k8sDoc
	secrets := map[string]*k8sDoc{}
	for i := range docs {
		switch d := &docs[i]; d.Kind {
		case "Deployment":
			deploy = d
		case "Secret":
			secrets[d.Metadata.Name] = d
		}
	}
	if deploy == nil {
		t.Fatalf("no Deployment rendered:\n%s", out)
	}
	pod := deploy.Spec.Template.Spec
	var sc *k8sContainer
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "reconciler" {
			sc = &pod.InitContainers[i]
		}
	}
	if sc == nil {
		t.Fatalf("no initContainers entry named reconciler (the native sidecar)")
	}
	if len(pod.Containers) == 0 {
		t.Error("no replica container beside the sidecar")
	}
	if sc.RestartPolicy != "Always" {
		t.Errorf("sidecar restartPolicy %q, want Always (a native sidecar)", sc.RestartPolicy)
	}
	if !strings.HasPrefix(sc.Image, "reconciler") {
		t.Errorf("sidecar image %q", sc.Image)
	}
	if sc.LivenessProbe == nil || sc.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz", sc.LivenessProbe)
	}
	if sc.ReadinessProbe == nil || sc.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", sc.ReadinessProbe)
	}
	if sc.Resources.Requests["cpu"] == "" || sc.Resources.Requests["memory"] == "" || sc.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", sc.Resources)
	}
	if sc.SecurityContext.RunAsUser == 0 || sc.SecurityContext.AllowPrivilegeEscalation == nil || *sc.SecurityContext.AllowPrivilegeEscalation || !sc.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("sidecar securityContext %+v: want non-root, no privilege escalation, read-only root", sc.SecurityContext)
	}
	grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
	if grace <= daemon.StopTimeout {
		t.Errorf("terminationGracePeriodSeconds %s is not above the daemon's stop bound %s", grace, daemon.StopTimeout)
	}
	ann := deploy.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" || ann["prometheus.io/port"] != "9477" {
		t.Errorf("scrape annotations %v", ann)
	}
	if len(sc.Ports) == 0 || sc.Ports[0].ContainerPort != 9477 {
		t.Errorf("status port %+v", sc.Ports)
	}

	env := map[string]k8sEnv{}
	for _, e := range sc.Env {
		env[e.Name] = e
	}
	fromSecret := func(name string) {
		t.Helper()
		ref := env[name].ValueFrom.SecretKeyRef
		s := secrets[ref.Name]
		switch {
		case ref.Name == "":
			t.Errorf("%s does not come from a Secret", name)
		case s == nil:
			t.Errorf("%s names Secret %q, which the base does not render", name, ref.Name)
		case s.Data[ref.Key] == "":
			t.Errorf("%s names key %q, absent from Secret %s", name, ref.Key, ref.Name)
		}
	}
	fromSecret("RECONCILER_STORE_URL")
	if tokenVar := env["RECONCILER_STATUS_TOKEN_ENV"].Value; tokenVar == "" {
		t.Error("RECONCILER_STATUS_TOKEN_ENV is not set (a non-loopback status address needs a token)")
	} else {
		fromSecret(tokenVar)
	}
	if v := env["RECONCILER_REPLICA_TOKEN_ENV"].Value; v != "" {
		fromSecret(v)
	}
	if got := env["GOMEMLIMIT"].ValueFrom.ResourceFieldRef.Resource; got != "limits.memory" {
		t.Errorf("GOMEMLIMIT comes from %q, want the container's limits.memory (the collector must keep under it)", got)
	}
	if env["RECONCILER_STATUS_LISTEN"].Value == "" {
		t.Error("RECONCILER_STATUS_LISTEN is not set: the default (loopback) is out of the kubelet's reach")
	}
}
