package config

import (
	"strings"
	"testing"
)

// store.read_url is checked for its form at load, naming the key.
func TestStoreReadURL(t *testing.T) {
	for _, c := range []struct{ name, body, says string }{
		{"sqlite store", "store:\n  url: sqlite://x.db\n  read_url: postgres://u@standby/db\n", "needs a postgres://"},
		{"not postgres", "store:\n  url: postgres://u@primary/db\n  read_url: sqlite://x.db\n", "want a postgres:// URL"},
		{"same server", "store:\n  url: postgres://u@primary/db\n  read_url: postgres://u@primary/db\n", "same server"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(c.body), nil)
			if err == nil || !strings.Contains(err.Error(), "store.read_url: ") || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Parse = %v, want store.read_url saying %q", err, c.says)
			}
		})
	}
	cfg, err := Parse("t.yaml", []byte("store:\n  url: postgres://u@primary/db\n  read_url: postgres://u@standby/db\n"), nil)
	if err != nil || cfg.StoreReadURL != "postgres://u@standby/db" {
		t.Fatalf("Parse = %+v, %v", cfg, err)
	}
}
