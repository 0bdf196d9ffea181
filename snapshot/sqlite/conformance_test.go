package sqlite_test

import (
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestConformance runs the contract every store backend meets.
func TestConformance(t *testing.T) { snapshottest.Run(t, snapshottest.SQLite) }
