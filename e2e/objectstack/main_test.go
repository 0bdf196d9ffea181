//go:build objectstack

package objectstack

import (
	"os"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// reconcilerBin is the reconciler binary under test, built once.
var reconcilerBin string

func TestMain(m *testing.M) {
	os.Exit(proctest.RunSuite(m, "../../cmd/reconciler", "e2e-objectstack", &reconcilerBin))
}
