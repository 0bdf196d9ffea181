package deploy

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"testing"

	"go.yaml.in/yaml/v3"
)

// kustomize renders dir (under deploy/) with `kubectl kustomize` and
// decodes each rendered document as a T; it also returns the output, for
// failure messages.
func kustomize[T any](t *testing.T, dir string) ([]T, []byte) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl not found on PATH: it renders deploy/%s (kubectl kustomize); install kubectl", dir)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	var docs []T
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var d T
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("rendered manifests: %v\n%s", err, out)
		}
		docs = append(docs, d)
	}
	return docs, out
}
