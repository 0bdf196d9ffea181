package daemon

import (
	"os"
	"testing"

	"github.com/objectstack-fleet/reconciler/reconcile"
)

// TestSyncGCPercentYieldsToGOGC: the daemon raises GOGC for its first full
// sync only when the operator has not set GOGC.
func TestSyncGCPercentYieldsToGOGC(t *testing.T) {
	t.Setenv("GOGC", "50")
	if got := syncGCPercent(); got != 0 {
		t.Errorf("with GOGC set: %d, want 0 (theirs holds)", got)
	}
	os.Unsetenv("GOGC") // t.Setenv restores it afterwards
	if got := syncGCPercent(); got != reconcile.DefaultSyncGCPercent {
		t.Errorf("without GOGC: %d, want %d", got, reconcile.DefaultSyncGCPercent)
	}
}
