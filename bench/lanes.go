package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// LanesConfig configures the lane benchmark: commit → replica serving,
// through the platform's push lane alone and through the reconciler, and
// lane messages per change across a fleet of sidecars.
type LanesConfig struct {
	AdminURL string        // PostgreSQL admin URL (a database is created)
	Objects  int           // object rows seeded
	Changes  int           // changes timed per mode
	Loss     float64       // fraction of PUBLISH lost on the bus
	Interval time.Duration // the reconciler's poll.interval
	Fleets   []int         // sidecar counts for messages per change
	FleetN   int           // changes per fleet size
	Wait     time.Duration // how long a change may take before it counts as never served
	OutDir   string
	Seed     uint64
}

// LanesResult is what one run measured.
type LanesResult struct {
	Config  LanesConfig
	Started time.Time
	Machine string
	// Push is the platform's own lane alone: the writer publishes one
	// message after commit, the bus loses Loss of them.
	Push latency
	// Reconciler is poll + hint + verified lanes over the same lossy bus
	// (the writer publishes nothing).
	Reconciler latency
	// ReconcilerMessages is the sidecar's messages per change (that
	// reached the bus).
	ReconcilerMessages float64
	// PushLost and ReconcilerLost count the PUBLISH commands the proxy
	// lost in each path.
	PushLost, ReconcilerLost int64
	Fleet                    []laneFleet
}

// laneFleet is messages per change across N sidecars (no loss).
type laneFleet struct {
	Sidecars     int
	Changes      int
	Messages     int
	PerChange    float64
	MaxPerChange int
	AllServed    latency // commit → every replica serving
}

// pgRows reads the rows a stand-in replica re-reads, from PostgreSQL.
type pgRows struct{ pool *pgxpool.Pool }

func (r pgRows) Get(typ, name string) (map[string]any, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var raw string
	err := r.pool.QueryRow(ctx, `SELECT metadata::text FROM sys_metadata WHERE type = $1 AND name = $2 AND state = 'active' LIMIT 1`, typ, name).Scan(&raw)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil, false
	}
	return m, true
}

// served records when a replica first served each label of an object.
type served struct {
	mu   sync.Mutex
	at   map[string]time.Time // name + "\x00" + label → first served
	wake chan struct{}
}

func newServed() *served { return &served{at: map[string]time.Time{}, wake: make(chan struct{}, 1)} }

func (s *served) onApply(name string, body map[string]any) {
	if body == nil {
		return
	}
	label, _ := body["label"].(string)
	k := name + "\x00" + label
	s.mu.Lock()
	if _, ok := s.at[k]; !ok {
		s.at[k] = time.Now()
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *served) wait(ctx context.Context, name, label string, within time.Duration) (time.Time, bool) {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		s.mu.Lock()
		at, ok := s.at[name+"\x00"+label]
		s.mu.Unlock()
		if ok {
			return at, true
		}
		select {
		case <-s.wake:
		case <-t.C:
			return time.Time{}, false
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

// laneRig is one database, one bus (with a lossy proxy in front) and the
// stand-in replicas.
type laneRig struct {
	cfg   LanesConfig
	db    string
	pool  *pgxpool.Pool
	redis *replicatest.Redis
	proxy *replicatest.LossyProxy
	rng   *rand.Rand
	seq   int
}

func newLaneRig(ctx context.Context, cfg LanesConfig) (*laneRig, error) {
	db, err := createLaneDB(ctx, cfg.AdminURL, "reconciler_bench_lanes", cfg.Objects)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		return nil, err
	}
	rd, err := replicatest.StartRedis()
	if err != nil {
		pool.Close()
		return nil, err
	}
	proxy, err := replicatest.NewLossyProxy(rd.Addr(), 0)
	if err != nil {
		rd.Close()
		pool.Close()
		return nil, err
	}
	return &laneRig{cfg: cfg, db: db, pool: pool, redis: rd, proxy: proxy, rng: rand.New(rand.NewPCG(cfg.Seed, 17))}, nil
}

func (r *laneRig) close() {
	r.proxy.Close()
	r.redis.Close()
	r.pool.Close()
	_ = dropDB(context.Background(), r.cfg.AdminURL, "reconciler_bench_lanes")
}

// createLaneDB creates and migrates a database and seeds n objects.
func createLaneDB(ctx context.Context, admin, name string, n int) (string, error) {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect admin: %w", err)
	}
	defer c.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := c.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", err
	}
	u, err := withDatabase(admin, name)
	if err != nil {
		return "", err
	}
	s, err := snapshot.Open(u, snapshot.OpenOptions{})
	if err != nil {
		return "", err
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	wc, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", err
	}
	defer wc.Close(ctx)
	for i := 1; i <= n; i++ {
		if _, err := wc.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ($1, 'object', $2, 'active', $3)`,
			fmt.Sprintf("lane%d", i), laneObject(i), laneBody(i, "v0")); err != nil {
			return "", fmt.Errorf("seed: %w", err)
		}
	}
	return u, nil
}

func laneObject(i int) string { return fmt.Sprintf("lane_obj_%d", i) }

func laneBody(i int, label string) string {
	return fmt.Sprintf(`{"name":%q,"label":%q,"fields":{"title":{"type":"text","label":"Title"}}}`, laneObject(i), label)
}

// change rewrites one random object's label with plain SQL and returns
// its name, the new label and the commit time.
func (r *laneRig) change(ctx context.Context) (string, string, time.Time, error) {
	r.seq++
	i := 1 + r.rng.IntN(r.cfg.Objects)
	label := fmt.Sprintf("v%d", r.seq)
	if _, err := r.pool.Exec(ctx, `UPDATE sys_metadata SET metadata = $2 WHERE id = $1`, fmt.Sprintf("lane%d", i), laneBody(i, label)); err != nil {
		return "", "", time.Time{}, err
	}
	return laneObject(i), label, time.Now(), nil
}

func (r *laneRig) node(opts replicatest.Options) (*replicatest.Node, error) {
	opts.BusURL = r.redis.URL()
	opts.Rows = pgRows{r.pool}
	return replicatest.Start(nil, opts)
}

// sidecar is a reconcile loop (poll + hint) with a replica driver beside
// one stand-in replica; its bus goes through the rig's proxy.
type laneSidecar struct {
	store  snapshot.Store
	bus    *replica.RedisBus
	drv    *replica.Driver
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	reg    *reconcile.Reconciler
}

func (r *laneRig) sidecar(ctx context.Context, n *replicatest.Node, origin string) (*laneSidecar, error) {
	s, err := snapshot.Open(r.db, snapshot.OpenOptions{MaxConns: 4})
	if err != nil {
		return nil, err
	}
	bus, err := replica.NewRedisBus(r.proxy.URL())
	if err != nil {
		s.Close()
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	drv, err := replica.New(replica.Options{URL: n.URL(), Bus: bus, Origin: origin, Client: client,
		Window: max(replica.DefaultWindow, 2*r.cfg.Interval), HealthInterval: time.Second})
	if err != nil {
		s.Close()
		_ = bus.Close()
		return nil, err
	}
	sc := &laneSidecar{store: s, bus: bus, drv: drv, client: client}
	sc.reg = reconcile.New(s, reconcile.Options{ReplicaID: origin, PollInterval: r.cfg.Interval, ResyncInterval: -1,
		Materializers: nopEngine(), Notifier: drv})
	cctx, cancel := context.WithCancel(ctx)
	sc.cancel = cancel
	h, _ := s.(snapshot.Hinter)
	for _, run := range []func(context.Context) error{drv.Run, sc.reg.Run, func(ctx context.Context) error {
		if h == nil {
			return nil
		}
		return h.Listen(ctx, sc.reg.Hint)
	}} {
		sc.wg.Add(1)
		go func() {
			defer sc.wg.Done()
			_ = run(cctx)
		}()
	}
	return sc, nil
}

func (sc *laneSidecar) close() {
	sc.cancel()
	sc.wg.Wait()
	sc.client.CloseIdleConnections()
	_ = sc.bus.Close()
	sc.store.Close()
}

// inSync waits until the driver reports every object in sync.
func (sc *laneSidecar) inSync(ctx context.Context, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if c := sc.drv.Summary().Counts; c[registry.ReplicaInSync] >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every object in sync within %s: %v", within, sc.drv.Summary().Counts)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// counter counts the sidecars' lane messages on the bus.
type counter struct {
	rdb  *redis.Client
	ps   *redis.PubSub
	mu   sync.Mutex
	byOb map[string]int
	done chan struct{}
}

func (r *laneRig) count(ctx context.Context) (*counter, error) {
	rdb := redis.NewClient(&redis.Options{Addr: r.redis.Addr(), DisableIdentity: true})
	ps := rdb.PSubscribe(ctx, "os:ps:*")
	if _, err := ps.Receive(ctx); err != nil {
		rdb.Close()
		return nil, err
	}
	c := &counter{rdb: rdb, ps: ps, byOb: map[string]int{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for m := range ps.Channel() {
			var env struct {
				N string `json:"n"`
				P struct {
					Event struct {
						Name string `json:"name"`
					} `json:"event"`
				} `json:"p"`
			}
			if json.Unmarshal([]byte(m.Payload), &env) != nil || !strings.HasPrefix(env.N, "reconciler:") {
				continue
			}
			c.mu.Lock()
			c.byOb[env.P.Event.Name]++
			c.mu.Unlock()
		}
	}()
	return c, nil
}

func (c *counter) take(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.byOb[name]
	delete(c.byOb, name)
	return n
}

func (c *counter) close() {
	_ = c.ps.Close()
	<-c.done
	_ = c.rdb.Close()
}

// RunLanes measures the lane path and writes lanes.md and lanes.json to
// cfg.OutDir.
func RunLanes(ctx context.Context, cfg LanesConfig, log *slog.Logger) error {
	logf := func(format string, args ...any) { log.InfoContext(ctx, fmt.Sprintf(format, args...)) }
	res := LanesResult{Config: cfg, Started: time.Now(), Machine: describeMachine()}
	rig, err := newLaneRig(ctx, cfg)
	if err != nil {
		return err
	}
	defer rig.close()

	lost := rig.proxy.Dropped.Load()
	if res.Push, err = measurePushAlone(ctx, rig); err != nil {
		return fmt.Errorf("push alone: %w", err)
	}
	res.PushLost, lost = rig.proxy.Dropped.Load()-lost, rig.proxy.Dropped.Load()
	logf("push alone: p50 %.1f ms, p99 %.1f ms, never served %d of %d", res.Push.P50, res.Push.P99, res.Push.Missed, cfg.Changes)
	if res.Reconciler, res.ReconcilerMessages, err = measureReconcilerLane(ctx, rig); err != nil {
		return fmt.Errorf("reconciler: %w", err)
	}
	res.ReconcilerLost = rig.proxy.Dropped.Load() - lost
	logf("reconciler: p50 %.1f ms, p99 %.1f ms, never served %d of %d, %.2f messages per change",
		res.Reconciler.P50, res.Reconciler.P99, res.Reconciler.Missed, cfg.Changes, res.ReconcilerMessages)
	for _, n := range cfg.Fleets {
		f, err := measureLaneFleet(ctx, rig, n)
		if err != nil {
			return fmt.Errorf("fleet of %d: %w", n, err)
		}
		logf("fleet of %d: %.2f messages per change (max %d), all serving p50 %.1f ms p99 %.1f ms",
			n, f.PerChange, f.MaxPerChange, f.AllServed.P50, f.AllServed.P99)
		res.Fleet = append(res.Fleet, f)
	}
	return writeLanes(cfg.OutDir, res)
}

// measurePushAlone is the platform's design: after commit the writer
// publishes one metadata.mutated; the replica re-reads the row. A lost
// message leaves the replica stale.
func measurePushAlone(ctx context.Context, rig *laneRig) (latency, error) {
	sv := newServed()
	node, err := rig.node(replicatest.Options{OnApply: sv.onApply})
	if err != nil {
		return latency{}, err
	}
	defer node.Close()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(rig.proxy.URL(), "redis://"), DisableIdentity: true})
	defer rdb.Close()
	rig.proxy.SetLoss(rig.cfg.Loss)
	defer rig.proxy.SetLoss(0)
	var xs []float64
	missed := 0
	for range rig.cfg.Changes {
		name, label, at, err := rig.change(ctx)
		if err != nil {
			return latency{}, err
		}
		msg := fmt.Sprintf(`{"n":"node-writer","t":%d,"p":{"originNode":"node-writer","event":{"type":"object","name":%q,"state":"active","organizationId":null}}}`,
			time.Now().UnixMilli(), name)
		if err := rdb.Publish(ctx, "os:ps:metadata.mutated", msg).Err(); err != nil {
			return latency{}, err
		}
		if got, ok := sv.wait(ctx, name, label, rig.cfg.Wait); ok {
			xs = append(xs, ms(got.Sub(at)))
		} else {
			missed++
		}
	}
	return summarize(xs, missed), nil
}

// measureReconcilerLane: the writer commits only; the sidecar's loop
// (poll + hint) publishes the lane, checks the replica and nudges again
// over the same lossy bus.
func measureReconcilerLane(ctx context.Context, rig *laneRig) (latency, float64, error) {
	sv := newServed()
	node, err := rig.node(replicatest.Options{OnApply: sv.onApply})
	if err != nil {
		return latency{}, 0, err
	}
	defer node.Close()
	sc, err := rig.sidecar(ctx, node, "reconciler:bench")
	if err != nil {
		return latency{}, 0, err
	}
	defer sc.close()
	if err := sc.inSync(ctx, rig.cfg.Objects, 2*time.Minute); err != nil {
		return latency{}, 0, err
	}
	cnt, err := rig.count(ctx)
	if err != nil {
		return latency{}, 0, err
	}
	defer cnt.close()
	rig.proxy.SetLoss(rig.cfg.Loss)
	defer rig.proxy.SetLoss(0)
	var xs []float64
	missed, msgs := 0, 0
	for range rig.cfg.Changes {
		name, label, at, err := rig.change(ctx)
		if err != nil {
			return latency{}, 0, err
		}
		if got, ok := sv.wait(ctx, name, label, rig.cfg.Wait); ok {
			xs = append(xs, ms(got.Sub(at)))
		} else {
			missed++
		}
		msgs += settleCount(ctx, cnt, name)
	}
	return summarize(xs, missed), float64(msgs) / float64(rig.cfg.Changes), nil
}

// settleCount waits until the sidecars have had time to see the replicas
// agree (a settle period past the last message) and takes the count.
func settleCount(ctx context.Context, cnt *counter, name string) int {
	select {
	case <-ctx.Done():
	case <-time.After(replica.DefaultJitter + replica.DefaultSettle):
	}
	return cnt.take(name)
}

// measureLaneFleet runs n sidecars beside n stand-in replicas on one bus
// (no loss) and counts the sidecars' messages per change.
func measureLaneFleet(ctx context.Context, rig *laneRig, n int) (laneFleet, error) {
	f := laneFleet{Sidecars: n, Changes: rig.cfg.FleetN}
	svs := make([]*served, n)
	var sides []*laneSidecar
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	for i := range n {
		svs[i] = newServed()
		node, err := rig.node(replicatest.Options{OnApply: svs[i].onApply})
		if err != nil {
			return f, err
		}
		defer node.Close()
		sc, err := rig.sidecar(ctx, node, fmt.Sprintf("reconciler:fleet-%d", i))
		if err != nil {
			return f, err
		}
		sides = append(sides, sc)
	}
	for _, s := range sides {
		if err := s.inSync(ctx, rig.cfg.Objects, 3*time.Minute); err != nil {
			return f, err
		}
	}
	cnt, err := rig.count(ctx)
	if err != nil {
		return f, err
	}
	defer cnt.close()
	var xs []float64
	missed := 0
	for range f.Changes {
		name, label, at, err := rig.change(ctx)
		if err != nil {
			return f, err
		}
		var last time.Time
		ok := true
		for _, sv := range svs {
			got, served := sv.wait(ctx, name, label, rig.cfg.Wait)
			if !served {
				ok = false
				break
			}
			if got.After(last) {
				last = got
			}
		}
		if ok {
			xs = append(xs, ms(last.Sub(at)))
		} else {
			missed++
		}
		m := settleCount(ctx, cnt, name)
		f.Messages += m
		f.MaxPerChange = max(f.MaxPerChange, m)
	}
	f.PerChange = float64(f.Messages) / float64(f.Changes)
	f.AllServed = summarize(xs, missed)
	return f, nil
}

func describeMachine() string {
	m := machine(context.Background(), "")
	return fmt.Sprintf("%s, %d cores, %.1f GB, %s, load %s", m.CPU, m.Cores, m.MemGB, m.Go, m.Load)
}

func writeLanes(dir string, r LanesResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "lanes.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# Lane path: commit → replica serving\n\n")
	fmt.Fprintf(&b, "Run %s on %s. `make bench` (bench/cmd/reconciler-bench-lanes). %d objects, %d changes per mode, "+
		"%.0f%% of PUBLISH lost by a TCP proxy in front of a private redis-server, poll.interval %s with LISTEN/NOTIFY hints.\n\n",
		r.Started.UTC().Format(time.RFC3339), r.Machine, c.Objects, c.Changes, c.Loss*100, c.Interval)
	fmt.Fprintf(&b, "The replicas are stand-ins (drivers/replica/replicatest) that answer the node's read-only routes and apply "+
		"lanes as ObjectStack 17.4 does (re-read the row from PostgreSQL on metadata.mutated); real nodes are measured by the "+
		"end-to-end suite (make test-objectstack).\n\n")
	fmt.Fprintf(&b, "| path | PUBLISH lost | served | p50 ms | p99 ms | max ms | lane messages per change |\n|---|---|---|---|---|---|---|\n")
	row := func(name string, lostN int64, l latency, msgs string) {
		fmt.Fprintf(&b, "| %s | %d | %d of %d | %.1f | %.1f | %.1f | %s |\n", name, lostN, l.N, l.N+l.Missed, l.P50, l.P99, l.Max, msgs)
	}
	row("platform push alone (writer publishes once)", r.PushLost, r.Push, "1 (a lost one is never served until a restart)")
	row("reconciler (poll + hint, verified lanes)", r.ReconcilerLost, r.Reconciler, fmt.Sprintf("%.2f (that reached the bus)", r.ReconcilerMessages))
	fmt.Fprintf(&b, "\n## Messages per change across N sidecars (no loss)\n\n")
	fmt.Fprintf(&b, "| sidecars | changes | messages | per change | max per change | commit → all serving p50 ms | p99 ms |\n|---|---|---|---|---|---|---|\n")
	fl := append([]laneFleet(nil), r.Fleet...)
	sort.Slice(fl, func(i, j int) bool { return fl[i].Sidecars < fl[j].Sidecars })
	for _, f := range fl {
		fmt.Fprintf(&b, "| %d | %d | %d | %.2f | %d | %.1f | %.1f |\n", f.Sidecars, f.Changes, f.Messages, f.PerChange, f.MaxPerChange, f.AllServed.P50, f.AllServed.P99)
	}
	if err := os.WriteFile(filepath.Join(dir, "lanes.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return nil
}
