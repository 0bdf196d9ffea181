package daemon

import (
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The daemon asks a store for its optional checks by name, and a store
// without one passes that check: the PostgreSQL store must have all three,
// or a renamed method would skip its check without a word.
func TestStoreCapabilities(t *testing.T) {
	t.Parallel()
	store, err := snapshot.Open(testdb.New(t), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, ok := store.(snapshot.StandbyChecker); !ok {
		t.Error("the PostgreSQL store is no snapshot.StandbyChecker: store.read_url would go unchecked")
	}
	if _, ok := store.(snapshot.PlatformChecker); !ok {
		t.Error("the PostgreSQL store is no snapshot.PlatformChecker: migrate would not refuse another application's database")
	}
	if _, ok := store.(snapshot.EncryptionReporter); !ok {
		t.Error("the PostgreSQL store is no snapshot.EncryptionReporter: a plaintext connection would not be warned about")
	}
}
