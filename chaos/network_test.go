package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/postgres"
)

// A network that fails, not a server that stops: the daemons reach the
// store over a veth pair into a network namespace the test creates, through
// a proxy that adds 50 ms of round trip and 1% of lost segments; then the
// path is cut silently (the link taken down: no RST, no FIN, nothing
// answers) for 30 s in the middle of a pass, and healed. Each daemon must
// notice within the dead-path bound (postgres.DeadPathBound plus a poll),
// and converge after healing with nothing missed. Long form only (`make
// chaos`): the partition alone takes 30 s per round.
func TestChaosNetwork(t *testing.T) {
	if !*long {
		t.Skip("the network scenario (30 s partitions) runs in `make chaos`")
	}
	t.Parallel()
	path := newNetPath(t)
	c, url := privateStore(t)
	ctx := context.Background()
	space := loadSpace{objects: 12, credentials: 3, others: 12}
	space.seed(t, url)

	local := fmt.Sprintf("127.0.0.1:%d", c.Port())
	proxy := startSlowProxy(t, path.listen(), local, 25*time.Millisecond, 0.01)
	far := strings.Replace(url, local, proxy.addr(), 1)

	r := newRig(t, "network")
	a := r.newDaemon("net-a", withApp(far, "chaos-net-a"))
	b := r.newDaemon("net-b", withApp(far, "chaos-net-b"), set("hint.listen", false))
	a.start()
	b.start()
	r.converge(url, a, b)
	r.searchStoreRows(url)

	rnd := rand.New(rand.NewPCG(7, 11))
	write := func(n int) { t.Helper(); writeObjects(t, url, rnd, space.objects, n) }

	// A slow, lossy path: everything still converges.
	for i := 0; i < 10; i++ {
		write(3)
		r.faultConverged("path with 50 ms RTT and 1% loss (userspace proxy over a veth)", url, a, b)
	}

	db, err := openDB(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storeDown := func(d *daemon) bool { s, err := d.status(); return err == nil && !s.StoreUp }
	const partitionFor = 30 * time.Second
	for i := 0; i < 2; i++ {
		// Writes go on at the store all along (on its own, local path).
		stopWrites := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			wrnd := rand.New(rand.NewPCG(uint64(i), 99))
			tick := time.NewTicker(150 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stopWrites:
					return
				case <-tick.C:
				}
				id := wrnd.IntN(space.objects)
				if _, err := db.ExecContext(ctx, upsertMetadata, fmt.Sprintf("object:o%d", id), "object", fmt.Sprintf("o%d", id), objectBody(wrnd)); err == nil {
					results.wrote(1)
				}
			}
		}()
		// Cut in the middle of a pass: right after a write that the
		// daemons (polling every 100 ms over a 50 ms RTT) are picking up.
		write(2)
		cut := time.Now()
		path.partition()
		results.fault("silent partition (veth down 30 s, mid-pass): time to detect")
		for _, d := range []*daemon{a, b} {
			eventually(t, d.id+" notices the dead path", func() bool { return storeDown(d) })
			took := time.Since(cut)
			results.converged("silent partition (veth down 30 s, mid-pass): time to detect", took)
			t.Logf("%s detected the dead path after %s (bound %s plus a poll)", d.id, took.Round(time.Millisecond), postgres.DeadPathBound)
			// A liveness bound, with room for a loaded machine: what the
			// README promises.
			if limit := postgres.DeadPathBound + 5*time.Second; took > limit {
				t.Errorf("%s detected the dead path after %s, over the stated bound (%s plus a poll; allowed %s)", d.id, took.Round(time.Millisecond), postgres.DeadPathBound, limit)
			}
		}
		if rest := partitionFor - time.Since(cut); rest > 0 {
			time.Sleep(rest) // the partition itself lasts 30 s
		}
		close(stopWrites)
		wg.Wait()
		path.heal()
		took := r.faultConverged("silent partition (veth down 30 s, mid-pass): converged after healing", url, a, b)
		t.Logf("converged %s after healing", took.Round(time.Millisecond))
	}
}
