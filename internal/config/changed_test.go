package config

import (
	"reflect"
	"slices"
	"testing"
)

// Every key has exactly one Config field naming it, so that Changed (and
// the daemon's reload warning built on it) never misses a key.
func TestEveryKeyHasAField(t *testing.T) {
	fields := map[string]string{}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		k := f.Tag.Get("key")
		if k == "" {
			continue
		}
		if prev, dup := fields[k]; dup {
			t.Errorf("key %s tags both %s and %s", k, prev, f.Name)
		}
		if _, ok := lookupKey(k); !ok {
			t.Errorf("field %s names unknown key %q", f.Name, k)
		}
		fields[k] = f.Name
	}
	for _, k := range Keys() {
		if _, ok := fields[k.Name]; !ok {
			t.Errorf("key %s has no Config field tagged with it", k.Name)
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
