package replica

import (
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

func TestMessagesAndStaysStale(t *testing.T) {
	msgs := Messages(reconcile.Change{Kind: registry.KindEngine, Key: "permission/editor", Action: reconcile.ActionRebuild}, "o")
	if len(msgs) != 2 || msgs[0].Channel != ChannelMetadata || msgs[1].Channel != ChannelAuthz ||
		!strings.Contains(string(msgs[0].Payload), `"name":"editor","state":"active"`) {
		t.Fatalf("permission rebuilt: %+v", msgs)
	}
	msgs = Messages(reconcile.Change{Kind: registry.KindEngine, Key: "object/account", Action: reconcile.ActionEvict}, "o")
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Payload), `"state":"deleted"`) {
		t.Fatalf("object evicted: %+v", msgs)
	}
	for key, want := range map[string]bool{"flow/f": true, "permission/p": true, "object/o": false, "org1:flow/f": false} {
		if got := StaysStale(registry.KindEngine, key); got != want {
			t.Errorf("StaysStale(%s) = %v, want %v", key, got, want)
		}
	}
}
