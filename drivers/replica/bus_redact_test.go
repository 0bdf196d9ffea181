package replica_test

import (
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
)

// A bus URL that does not parse never puts its password in the error.
func TestBusURLErrorRedacted(t *testing.T) {
	for _, raw := range []string{"redis://u:s3cr%zzet-canary@host:6379/0", "redis://u:s3cret-canary@ho st:6379/0"} {
		_, err := replica.NewRedisBus(raw)
		if err == nil {
			t.Fatalf("%s parsed", raw)
		}
		if strings.Contains(err.Error(), "canary") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}
