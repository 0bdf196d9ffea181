//go:build objectstack

package objectstack

import (
	"testing"
	"time"
)

// TestRedisStopStart: the private bus can go down and come back on the
// same address (for "the bus briefly stopped"), and a pattern subscriber
// sees what is published.
func TestRedisStopStart(t *testing.T) {
	r := StartRedis(t)
	sub, err := r.PSubscribe("os:ps:*")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Publish("os:ps:metadata.mutated", `{"p":{}}`); err != nil || n != 1 {
		t.Fatalf("publish: %d receivers, %v; want 1", n, err)
	}
	select {
	case m := <-sub.C:
		if m.Channel != "os:ps:metadata.mutated" || m.Payload != `{"p":{}}` {
			t.Errorf("received %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the subscriber received nothing")
	}
	r.Stop()
	sub.Close()
	if _, err := r.Publish("os:ps:x", "y"); err == nil {
		t.Fatal("publish succeeded on a stopped server")
	}
	r.Start()
	if n, err := r.Publish("os:ps:x", "y"); err != nil || n != 0 {
		t.Fatalf("publish after restart: %d, %v", n, err)
	}
}
