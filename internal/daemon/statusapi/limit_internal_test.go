package statusapi

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// TestListenerBoundsConnections: idle connections past the bound wait in
// the kernel's queue, never taking a descriptor of the server's; one
// closing lets the next in.
func TestListenerBoundsConnections(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const bound = 8
	ln := limitListener(raw, bound)
	var accepted atomic.Int64
	var mu sync.Mutex
	var held []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	var clients []net.Conn
	for range bound + 12 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	proctest.Eventually(t, 10*time.Second, 5*time.Millisecond, "the bound accepted", func() bool { return accepted.Load() == bound })
	if n := accepted.Load(); n != bound {
		t.Fatalf("accepted %d connections, bound %d", n, bound)
	}
	mu.Lock()
	held[0].Close()
	mu.Unlock()
	proctest.Eventually(t, 10*time.Second, 5*time.Millisecond, "one more accepted after a close", func() bool { return accepted.Load() == bound+1 })
	ln.Close()
	wg.Wait()
	for _, c := range append(clients, held...) {
		c.Close()
	}
}
