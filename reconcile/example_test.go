package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// compiledView is what this service keeps for each view.
type compiledView struct{ object string }

func (compiledView) Close() error { return nil }

// A Go service runs the loop in-process with its own materializer and reads
// the live instances from the registries.
func Example() {
	dir, _ := os.MkdirTemp("", "reconcile-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "store.db")
	store, err := snapshot.Open("sqlite://"+path, snapshot.OpenOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	ctx := context.Background()
	if err := store.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	db, _ := sql.Open("sqlite", path)
	defer db.Close()
	_, _ = db.Exec(`INSERT INTO sys_metadata (id, type, name, metadata) VALUES
		('1', 'object', 'account', '{"fields":{"name":{"type":"text"}}}'),
		('2', 'view', 'all_accounts', '{"object":"account"}')`)

	engine := reconcile.MaterializerFunc(func(ctx context.Context, d reconcile.Desired) (registry.Instance, error) {
		return compiledView{object: string(d.Body)}, nil
	})
	rec := reconcile.New(store, reconcile.Options{
		PollInterval:  100 * time.Millisecond,
		Materializers: map[registry.Kind]reconcile.Materializer{registry.KindEngine: engine},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- rec.Run(runCtx) }()
	<-rec.Synced()
	for _, e := range rec.Registries().List(registry.KindEngine, "") {
		fmt.Println(e.Key, e.State)
	}
	stop()
	fmt.Println(<-done)
	// Output:
	// object/account ready
	// view/all_accounts ready
	// <nil>
}
