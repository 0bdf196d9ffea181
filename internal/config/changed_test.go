package config

import (
	"reflect"
	"slices"
	"testing"
)

// Every key binds its own Config field, and every field but File is bound
// to a key, so that Changed (and the daemon's reload warning built on it)
// never misses a key.
func TestEveryKeyHasAField(t *testing.T) {
	var c Config
	base := reflect.ValueOf(&c).Elem()
	byAddr := map[uintptr]string{}
	for i := range base.NumField() {
		byAddr[base.Field(i).Addr().Pointer()] = base.Type().Field(i).Name
	}
	bound := map[string]string{}
	for _, k := range declarations() {
		f, ok := byAddr[reflect.ValueOf(k.addr(&c)).Pointer()]
		if !ok {
			t.Errorf("key %s binds no field of Config", k.Name)
			continue
		}
		if prev, dup := bound[f]; dup {
			t.Errorf("field %s is bound by both %s and %s", f, prev, k.Name)
		}
		bound[f] = k.Name
	}
	for i := range base.NumField() {
		if f := base.Type().Field(i).Name; f != "File" && bound[f] == "" {
			t.Errorf("field %s is bound to no key", f)
		}
	}
}

func TestChanged(t *testing.T) {
	a, err := Parse("a.yaml", []byte("poll:\n  interval: 2s\nnotify:\n  exec:\n    command: [a, b]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	if got := Changed(a, &b); len(got) != 0 {
		t.Fatalf("same config: %v", got)
	}
	b.ExecCommand = []string{"a", "c"}
	b.PollInterval = 0
	b.ReplicaOrigin = "x"
	b.File = "other.yaml"
	if got, want := Changed(a, &b), []string{KeyPollInterval, KeyExecCommand, KeyReplicaOrigin}; !slices.Equal(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
}
