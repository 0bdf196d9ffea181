// Package backends links every store backend into a binary: importing it
// (for its side effects) registers each backend's URL schemes with
// snapshot.Open and with store.url's check. The daemon, the command's
// tools, the benchmarks and snapshottest import it; a new backend is one
// more import line here.
package backends

import (
	// PostgreSQL: postgres://, postgresql://.
	_ "github.com/objectstack-fleet/reconciler/snapshot/postgres"
	// SQLite: sqlite://.
	_ "github.com/objectstack-fleet/reconciler/snapshot/sqlite"
)
