package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// loadSpace is the key space the writers work on. Objects are never
// deleted and credentials never cleared, so every entry can be ready;
// views, flows and settings come and go.
type loadSpace struct {
	objects, credentials, others int
	upstream                     string
}

func (s loadSpace) seed(t *testing.T, url string) { s.seedTB(t, url) }

func (s loadSpace) seedTB(t testing.TB, url string) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < s.objects; i++ {
		snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("object:o%d", i), "object", fmt.Sprintf("o%d", i), objectBody(rnd))
	}
	for i := 0; i < s.credentials; i++ {
		snapshottest.Exec(t, url, upsertCredential, fmt.Sprintf("cred%d", i), secretValue(i))
		if s.upstream != "" {
			snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("connector:c%d", i), "connector", fmt.Sprintf("c%d", i),
				connectorBody(s.upstream, fmt.Sprintf("cred%d", i), "5s"))
		}
	}
}

// write runs one random write statement inside tx.
func (s loadSpace) write(ctx context.Context, tx pgx.Tx, rnd *rand.Rand) error {
	var err error
	switch p := rnd.IntN(10); {
	case p < 3: // update an object, sometimes referencing another (cycles included)
		i := rnd.IntN(s.objects)
		var refs []string
		if rnd.IntN(3) == 0 {
			refs = append(refs, fmt.Sprintf("o%d", rnd.IntN(s.objects)))
		}
		_, err = tx.Exec(ctx, upsertMetadata, fmt.Sprintf("object:o%d", i), "object", fmt.Sprintf("o%d", i), objectBody(rnd, refs...))
	case p < 4 && s.credentials > 0: // rotate a credential
		i := rnd.IntN(s.credentials)
		_, err = tx.Exec(ctx, upsertCredential, fmt.Sprintf("cred%d", i), secretValue(rnd.IntN(1000)))
	case p < 7: // a view or flow on some object
		i := rnd.IntN(s.others)
		typ := []string{"view", "flow", "permission"}[i%3]
		body := fmt.Sprintf(`{"object":"o%d","n":%d}`, rnd.IntN(s.objects), rnd.IntN(1000))
		if typ == "flow" {
			body = fmt.Sprintf(`{"nodes":[{"id":"start","type":"start","config":{"objectName":"o%d"}}],"n":%d}`, rnd.IntN(s.objects), rnd.IntN(1000))
		}
		_, err = tx.Exec(ctx, upsertMetadata, fmt.Sprintf("%s:x%d", typ, i), typ, fmt.Sprintf("x%d", i), body)
	case p < 8: // archive one
		_, err = tx.Exec(ctx, `UPDATE sys_metadata SET state = 'archived' WHERE id = $1`, fmt.Sprintf("view:x%d", rnd.IntN(s.others)))
	default: // delete one
		typ := []string{"view", "flow", "permission"}[rnd.IntN(3)]
		_, err = tx.Exec(ctx, `DELETE FROM sys_metadata WHERE id = $1`, fmt.Sprintf("%s:x%d", typ, rnd.IntN(s.others)))
	}
	return err
}

// writers runs n writers until ctx ends: transactions of 1–5 statements,
// random pauses inside them (one in ten held open for 1–2 s, across many
// polls), one in five rolled back. It returns the statements committed
// and rolled back.
func (s loadSpace) writers(ctx context.Context, p *pgxpool.Pool, n int, seed uint64) (committed, rolledBack int64) {
	var wg sync.WaitGroup
	var c, rb atomic.Int64
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			for ctx.Err() == nil {
				stmts, err := s.tx(ctx, p, rnd)
				switch {
				case err == nil:
					c.Add(stmts)
				case errors.Is(err, errRolledBack):
					rb.Add(stmts)
				}
			}
		}()
	}
	wg.Wait()
	return c.Load(), rb.Load()
}

var errRolledBack = errors.New("rolled back")

func (s loadSpace) tx(ctx context.Context, p *pgxpool.Pool, rnd *rand.Rand) (int64, error) {
	// The transaction outlives ctx by a little, so that a held one still
	// commits at the end of the load rather than being cut.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	tx, err := p.Begin(tctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(tctx) //nolint:errcheck
	n := 1 + rnd.IntN(5)
	hold := rnd.IntN(10) == 0
	for i := 0; i < n; i++ {
		if err := s.write(tctx, tx, rnd); err != nil {
			return int64(i), errRolledBack // deadlock or conflict: aborted
		}
		pause := time.Duration(rnd.IntN(30)) * time.Millisecond
		if hold && i == 0 {
			pause = time.Second + time.Duration(rnd.IntN(1000))*time.Millisecond
		}
		select {
		case <-time.After(pause): // the writer's think time, not a wait for a condition
		case <-tctx.Done():
		}
	}
	if rnd.IntN(5) == 0 {
		return int64(n), errors.Join(errRolledBack, tx.Rollback(tctx))
	}
	if err := tx.Commit(tctx); err != nil {
		return int64(n), errRolledBack
	}
	return int64(n), nil
}

// Out-of-order commits at load: writers with random-length transactions,
// some held open across many polls, some rolled back, against three
// daemons (hints on, hints off, and one started in the middle of the
// load). Every daemon ends equal to the rows.
func TestChaosLoad(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	r := newRig(t, "load")
	up := okUpstream(t)
	space := loadSpace{objects: 30, credentials: 6, others: 60, upstream: up.URL}
	space.seed(t, url)

	d1 := r.newDaemon("load-hints", withApp(url, "chaos-load-1"))
	d2 := r.newDaemon("load-nohints", withApp(url, "chaos-load-2"), set("hint.listen", false))
	d3 := r.newDaemon("load-late", withApp(url, "chaos-load-3"), set("apply.concurrency", 1))
	d1.start()
	d2.start()
	r.converge(url, d1, d2)
	r.searchStoreRows(url)

	rounds := iterations(1, 4)
	dur := time.Duration(iterations(6, 15)) * time.Second
	writers := iterations(4, 8)
	p := pool(t, url)
	for round := 0; round < rounds; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		done := make(chan [2]int64, 1)
		go func() {
			c, rb := space.writers(ctx, p, writers, uint64(round+1))
			done <- [2]int64{c, rb}
		}()
		if round == 0 {
			// A daemon that relists while writers are busy.
			select {
			case <-time.After(dur / 2):
			case <-ctx.Done():
			}
			d3.start()
		}
		n := <-done
		cancel()
		results.wrote(n[0])
		results.rolled(n[1])
		took := r.faultConverged("out-of-order commits at load", url, d1, d2, d3)
		t.Logf("round %d: %d statements committed, %d rolled back by %d writers in %s; converged %s after",
			round, n[0], n[1], writers, dur, took.Round(time.Millisecond))
	}
}
