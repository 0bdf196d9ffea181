package secret_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/secret"
)

const secretCanary = "canary-secret-7f3e1d"

// holder keeps a Secret where fmt cannot call its methods: an unexported
// field, printed by reflection.
type holder struct {
	name   string
	secret secret.Secret
	nested struct{ s secret.Secret }
	list   []secret.Secret
	ptr    *secret.Secret
	m      map[string]secret.Secret
}

type exported struct {
	Name   string
	Secret secret.Secret
}

func TestSecretNeverPrinted(t *testing.T) {
	s := secret.New(secretCanary)
	h := holder{name: "crm", secret: s, list: []secret.Secret{s}, ptr: &s, m: map[string]secret.Secret{"k": s}}
	h.nested.s = s
	e := exported{Name: "crm", Secret: s}
	var out []string
	for _, v := range []any{s, &s, h, &h, e, &e, []any{h}, map[string]any{"h": h}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%T"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
	}
	b, _ := json.Marshal(e)
	out = append(out, string(b))
	var logs strings.Builder
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "secret", s, "holder", h, "exported", e)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "secret", s, "exported", e)
	out = append(out, logs.String())
	for _, o := range out {
		if strings.Contains(o, secretCanary) || strings.Contains(o, fmt.Sprintf("%x", secretCanary)) || strings.Contains(o, fmt.Sprintf("%X", secretCanary)) {
			t.Fatalf("printed the value: %s", o)
		}
	}
	if s.Reveal() != secretCanary || s.IsEmpty() {
		t.Fatal("Reveal lost the value")
	}
	var zero secret.Secret
	if zero.Reveal() != "" || !zero.IsEmpty() || fmt.Sprintf("%+v", holder{}) == "" {
		t.Fatal("zero Secret")
	}
}
