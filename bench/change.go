package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// latency summarizes commit → applied latencies in milliseconds.
type latency struct {
	N             int
	P50, P99, Max float64
	Missed        int // changes not applied within the wait
}

func summarize(xs []float64, missed int) latency {
	l := latency{N: len(xs), Missed: missed, P50: median(xs), P99: quantile(xs, 0.99)}
	for _, x := range xs {
		l.Max = max(l.Max, x)
	}
	return l
}

// changeResult is the change-cost comparison at one size.
type changeResult struct {
	Rows     int
	Poll     latency // reconciler, polling only
	Hint     latency // reconciler with LISTEN/NOTIFY
	Push     latency // Redis pub/sub address + re-read (nil N: Redis unreachable)
	PassMS   float64 // median duration of the one-change passes (polling)
	IdleCPU  float64 // µs of client CPU per idle poll of this (direct) loop
	IdleMS   float64 // server ms per idle poll of this loop
	Drop     *dropResult
	RedisErr string
}

// dropResult is the fraction of changes applied when DropRate of the push
// messages are lost.
type dropResult struct {
	Changes     int
	Dropped     int
	PushApplied int
	PullApplied int
}

// pushLane is today's design: after commit the writer publishes the row's
// address; the subscriber re-reads the row and applies it.
type pushLane struct {
	rdb     *redis.Client
	ps      *redis.PubSub
	store   snapshot.Store
	channel string
	wg      sync.WaitGroup

	mu      sync.Mutex
	seen    map[string]applied // metadata id → newest applied
	wake    chan struct{}
	rng     *rand.Rand
	drop    float64
	dropped int
}

func startPush(ctx context.Context, addr, dbURL, channel string, drop float64, seed uint64) (*pushLane, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second})
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s not reachable: %w", addr, err)
	}
	s, err := snapshot.Open(dbURL, snapshot.OpenOptions{})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	p := &pushLane{rdb: rdb, store: s, channel: channel, seen: map[string]applied{},
		wake: make(chan struct{}, 1), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), drop: drop}
	p.ps = rdb.Subscribe(ctx, channel)
	if _, err := p.ps.Receive(ctx); err != nil { // the subscription confirmation
		p.close()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	ch := p.ps.Channel()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for m := range ch {
			p.handle(ctx, m.Payload)
		}
	}()
	return p, nil
}

// handle applies one address message: table "/" key.
func (p *pushLane) handle(ctx context.Context, payload string) {
	table, key, ok := strings.Cut(payload, "/")
	if !ok {
		return
	}
	p.mu.Lock()
	lost := p.drop > 0 && p.rng.Float64() < p.drop
	if lost {
		p.dropped++
	}
	p.mu.Unlock()
	if lost {
		return
	}
	rows, err := p.store.Read(ctx, []snapshot.Address{{Table: snapshot.Table(table), Key: key}})
	if err != nil || len(rows.Metadata) != 1 {
		return
	}
	now := time.Now()
	p.mu.Lock()
	if a, ok := p.seen[key]; !ok || rows.Metadata[0].Revision > a.rev {
		p.seen[key] = applied{rev: rows.Metadata[0].Revision, at: now}
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pushLane) publish(ctx context.Context, id string) error {
	return p.rdb.Publish(ctx, p.channel, string(snapshot.TableMetadata)+"/"+id).Err()
}

func (p *pushLane) waitApplied(ctx context.Context, id string, rev int64, timeout time.Duration) (applied, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		p.mu.Lock()
		a, ok := p.seen[id]
		p.mu.Unlock()
		if ok && a.rev >= rev {
			return a, true
		}
		select {
		case <-p.wake:
		case <-t.C:
			return applied{}, false
		case <-ctx.Done():
			return applied{}, false
		}
	}
}

func (p *pushLane) revision(id string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[id].rev
}

func (p *pushLane) close() {
	if p.ps != nil {
		p.ps.Close()
	}
	p.wg.Wait()
	p.rdb.Close()
	p.store.Close()
}

// writer changes one metadata row per call, as an application would.
type writer struct{ conn *pgx.Conn }

func (w writer) change(ctx context.Context, id string, i int) (int64, time.Time, error) {
	var rev int64
	err := w.conn.QueryRow(ctx, `UPDATE sys_metadata SET metadata = jsonb_set(metadata, '{label}', to_jsonb($2::text))
WHERE id = $1 RETURNING revision`, id, fmt.Sprintf("changed %d", i)).Scan(&rev)
	return rev, time.Now(), err
}

func engineKey(id string) string { return "object/obj" + strings.TrimPrefix(id, "o") }

// measureChange times commit → applied for one changed row among db.rows,
// with polling only and with the hint, while the push lane (when Redis is
// reachable) applies the same changes; then it compares the paths with 1%
// of push messages dropped.
func measureChange(ctx context.Context, cfg Config, db *benchDB, ss *pgss, logf func(string, ...any)) (changeResult, error) {
	res := changeResult{Rows: db.rows}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(db.rows)))
	wc, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return res, err
	}
	defer wc.Close(context.Background())
	w := writer{wc}
	seq := 0

	push, err := startPush(ctx, cfg.Redis, db.url, "bench-"+db.name, 0, cfg.Seed)
	if err != nil {
		res.RedisErr = err.Error()
		logf("push lane skipped: %v", err)
	} else {
		defer push.close()
	}
	var pushLat []float64
	pushMissed := 0
	// One loop (one relist) serves the idle client-CPU windows, the polling
	// runs and, once its listener is wired, the hint runs.
	l, err := startLoop(ctx, db.url, loopOptions{interval: cfg.ChangeInterval})
	if err != nil {
		return res, err
	}
	defer l.stop()
	time.Sleep(cfg.ChangeInterval * 3)
	var cpu, srv []float64
	for range cfg.Runs {
		w, err := window(ctx, loopTicker{l}, nil, ss, max(cfg.IdleWindow, 20*cfg.ChangeInterval), true)
		if err != nil {
			return res, fmt.Errorf("idle client CPU at %d rows: %w", db.rows, err)
		}
		cpu, srv = append(cpu, w.ClientCPU), append(srv, w.ServerMS)
	}
	res.IdleCPU, res.IdleMS = median(cpu), median(srv)
	logf("idle reconciler %8d rows, direct, poll.interval %v: client %.0f µs, server %.3f ms per poll", db.rows, cfg.ChangeInterval, res.IdleCPU, res.IdleMS)
	for _, hint := range []bool{false, true} {
		if hint {
			if err := l.listen(); err != nil {
				return res, err
			}
			time.Sleep(cfg.ChangeInterval * 3) // the listener connects
		}
		var lat []float64
		missed := 0
		for range cfg.Changes {
			seq++
			id := fmt.Sprintf("o%d", 1+rng.IntN(db.rows))
			rev, t0, err := w.change(ctx, id, seq)
			if err != nil {
				return res, fmt.Errorf("change %s: %w", id, err)
			}
			if push != nil {
				if err := push.publish(ctx, id); err != nil {
					logf("publish: %v", err)
				}
			}
			if a, ok := l.waitApplied(ctx, engineKey(id), rev, 5*cfg.ChangeInterval+2*time.Second); ok {
				lat = append(lat, ms(a.at.Sub(t0)))
			} else {
				missed++
			}
			if push != nil {
				if a, ok := push.waitApplied(ctx, id, rev, 2*time.Second); ok {
					pushLat = append(pushLat, ms(a.at.Sub(t0)))
				} else {
					pushMissed++
				}
			}
			// Start the next change at a uniformly random phase of the poll tick.
			time.Sleep(time.Duration(rng.Int64N(int64(cfg.ChangeInterval))))
		}
		if hint {
			res.Hint = summarize(lat, missed)
			logf("change %8d rows, hint:    p50 %.1f ms p99 %.1f ms (n=%d, missed %d)", db.rows, res.Hint.P50, res.Hint.P99, res.Hint.N, missed)
		} else {
			res.Poll = summarize(lat, missed)
			l.mu.Lock()
			res.PassMS = median(pick(l.changeDs, ms))
			l.changeDs = nil
			l.mu.Unlock()
			logf("change %8d rows, polling: p50 %.1f ms p99 %.1f ms (n=%d, missed %d), one-change pass %.2f ms",
				db.rows, res.Poll.P50, res.Poll.P99, res.Poll.N, missed, res.PassMS)
			if err := measureDrop(ctx, cfg, db, l, w, &seq, &res, logf); err != nil {
				return res, err
			}
		}
	}
	if push != nil {
		res.Push = summarize(pushLat, pushMissed)
		logf("change %8d rows, push:    p50 %.1f ms p99 %.1f ms (n=%d, missed %d)", db.rows, res.Push.P50, res.Push.P99, res.Push.N, pushMissed)
	}
	return res, nil
}

// measureDrop makes DropChanges changes on distinct rows while the push
// subscriber loses DropRate of its messages (seeded RNG), and counts what
// each path applied once the reconciler has converged.
func measureDrop(ctx context.Context, cfg Config, db *benchDB, l *loop, w writer, seq *int, res *changeResult, logf func(string, ...any)) error {
	if res.RedisErr != "" {
		return nil
	}
	push, err := startPush(ctx, cfg.Redis, db.url, "bench-drop-"+db.name, cfg.DropRate, cfg.Seed)
	if err != nil {
		res.RedisErr = err.Error()
		return nil
	}
	defer push.close()
	n := min(cfg.DropChanges, db.rows)
	revs := make(map[string]int64, n)
	for i := range n {
		*seq++
		id := fmt.Sprintf("o%d", 1+i*(db.rows/n))
		rev, _, err := w.change(ctx, id, *seq)
		if err != nil {
			return fmt.Errorf("change %s: %w", id, err)
		}
		revs[id] = rev
		if err := push.publish(ctx, id); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	d := &dropResult{Changes: n}
	deadline := time.Now().Add(60 * time.Second)
	for id, rev := range revs {
		if _, ok := l.waitApplied(ctx, engineKey(id), rev, time.Until(deadline)); ok && l.servingRevision(engineKey(id)) >= rev {
			d.PullApplied++
		}
	}
	// Give the push lane the same chance to finish what it received.
	time.Sleep(time.Second)
	for id, rev := range revs {
		if push.revision(id) >= rev {
			d.PushApplied++
		}
	}
	push.mu.Lock()
	d.Dropped = push.dropped
	push.mu.Unlock()
	res.Drop = d
	logf("drop %.1f%% at %d rows: push applied %d/%d (%d dropped), pull applied %d/%d",
		100*cfg.DropRate, db.rows, d.PushApplied, n, d.Dropped, d.PullApplied, n)
	return nil
}
