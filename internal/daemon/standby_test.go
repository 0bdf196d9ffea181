package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// With store.read_url on a real streaming standby, rows written on the
// primary apply, and status names the standby; a read_url that is the
// primary itself is refused at start, naming the key.
func TestStandbyReadURL(t *testing.T) {
	primary := testdb.NewCluster(t)
	url := primary.URL("postgres")
	mig, err := snapshot.Open(url, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	mig.Close()
	standby := primary.NewStandby(t)

	t.Run("refused: a primary", func(t *testing.T) {
		cfg := testConfig(t, "")
		cfg.StoreURL = url
		cfg.StoreReadURL = strings.Replace(url, "postgres://", "postgresql://", 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := New(Options{Config: cfg, Version: "test"}).Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "store.read_url") || !strings.Contains(err.Error(), "is a primary") {
			t.Fatalf("Run = %v, want a refusal naming store.read_url", err)
		}
	})

	cfg := testConfig(t, "")
	cfg.StoreURL, cfg.StoreReadURL, cfg.PollInterval = url, standby.URL("postgres"), 100*time.Millisecond
	d, _, stop := started(t, Options{Config: cfg, Version: "test"})
	for _, id := range []string{"o1", "o2"} {
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, state, metadata)
VALUES ($1, 'object', $1, 'active', '{"name":"`+id+`","fields":{"title":{"type":"text"}}}')`, id)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := d.rec.Load()
		st := rec.Status()
		if rec.Registries().Len(registry.KindEngine) >= 2 && st.Stall.Standby != nil && st.Stall.Standby.Error == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows written on the primary never applied through the standby: status %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
