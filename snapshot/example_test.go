package snapshot_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The loop's use of a store: relist once, then poll from the cursor and
// re-read the rows of the addresses it returns.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	url := "sqlite://" + filepath.Join(dir, "store.db")
	s, err := snapshot.Open(url, snapshot.OpenOptions{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		panic(err)
	}
	_, cur, err := s.Relist(ctx)
	if err != nil {
		panic(err)
	}

	// An application writes a row with plain SQL; triggers do the rest.
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "store.db"))
	if _, err := db.ExecContext(ctx, `INSERT INTO sys_connector_credential (ref, value) VALUES ('crm-token', 'secret')`); err != nil {
		panic(err)
	}
	db.Close()

	addrs, _, err := s.Poll(ctx, cur)
	if err != nil {
		panic(err)
	}
	rows, _ := s.Read(ctx, addrs)
	fmt.Println(addrs, rows.Credentials[0].Ref, rows.Credentials[0].Value)
	// Output: [{sys_connector_credential crm-token}] crm-token [REDACTED]
}
