package replicatest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DB is the shared database the nodes read rows from: sys_metadata's
// active rows by type and name (org-less), datasources' active flag.
type DB struct {
	mu   sync.Mutex
	rows map[string]map[string]any // type+"/"+name → body
}

// NewDB returns an empty database.
func NewDB() *DB { return &DB{rows: map[string]map[string]any{}} }

// Put writes an active row (as plain SQL would: no message).
func (db *DB) Put(typ, name string, body map[string]any) {
	db.mu.Lock()
	db.rows[typ+"/"+name] = clone(body)
	db.mu.Unlock()
}

// Delete removes a row.
func (db *DB) Delete(typ, name string) {
	db.mu.Lock()
	delete(db.rows, typ+"/"+name)
	db.mu.Unlock()
}

// Get reads a row.
func (db *DB) Get(typ, name string) (map[string]any, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	b, ok := db.rows[typ+"/"+name]
	return clone(b), ok
}

func (db *DB) all(typ string) map[string]map[string]any {
	db.mu.Lock()
	defer db.mu.Unlock()
	out := map[string]map[string]any{}
	for k, b := range db.rows {
		if t, n, _ := strings.Cut(k, "/"); t == typ {
			out[n] = clone(b)
		}
	}
	return out
}

func clone(b map[string]any) map[string]any {
	if b == nil {
		return nil
	}
	raw, _ := json.Marshal(b)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// Rows is where a node reads the rows a lane message names.
type Rows interface {
	// Get returns the active, org-less row of type and name.
	Get(typ, name string) (map[string]any, bool)
}

// Options configure a Node.
type Options struct {
	// Rows, if set, replaces the DB given to Start as the source of rows
	// (a benchmark reads them from PostgreSQL).
	Rows Rows
	// OnApply, if set, is called each time the node registers (body set)
	// or unregisters (body nil) an object after a lane message.
	OnApply func(name string, body map[string]any)
	// BusURL is the Redis bus (redis://…).
	BusURL string
	// Prefix is the bus key prefix (default "os:").
	Prefix string
	// Token is the bearer token the node accepts ("" accepts any).
	Token string
	// Loss is the fraction of lane messages the node drops on receipt.
	Loss float64
	// DropFirst drops the first this many lane messages received.
	DropFirst int
	// Version is what the health endpoint reports (default "17.4.0").
	Version string
	// NoTable, if set, says which registered objects have no table: their
	// data API answers 500 DATABASE_ERROR, as a 17.4 node's does.
	NoTable func(name string) bool
	// Save, if set, serves PUT /api/v1/meta/object/<name> (the platform's
	// save route) with the request body, answering the status it returns;
	// without it every write is refused with 405.
	Save func(name string, body []byte) int
}

// Node is a stand-in replica. Create it with Start; Close it.
type Node struct {
	db    *DB
	rows  Rows
	opts  Options
	srv   *httptest.Server
	rdb   *redis.Client
	id    string
	stop  context.CancelFunc
	done  chan struct{}
	ready chan struct{}

	mu          sync.Mutex
	booted      time.Time
	bootFor     time.Duration             // answers 503 until up this long
	objects     map[string]map[string]any // registered objects
	flows       map[string]map[string]any // loaded at boot
	permissions map[string]map[string]any // loaded at boot
	i18n        map[string]map[string]any // locale → authored translations
	pools       map[string]bool           // datasource → pool open
	down        bool

	// Received counts lane messages received (dropped ones included).
	Received atomic.Int64
	// Writes counts requests that were not GET (probes must never write).
	Writes atomic.Int64
	// Saves counts the PUT requests Options.Save served.
	Saves atomic.Int64
}

// Start boots a node on db and subscribes it to the bus.
func Start(db *DB, opts Options) (*Node, error) {
	if opts.Prefix == "" {
		opts.Prefix = "os:"
	}
	ro, err := redis.ParseURL(opts.BusURL)
	if err != nil {
		return nil, fmt.Errorf("bus url: %w", err)
	}
	ro.DisableIdentity = true
	if opts.Rows == nil && db == nil {
		return nil, fmt.Errorf("no rows: give a DB or Options.Rows")
	}
	n := &Node{db: db, rows: db, opts: opts, rdb: redis.NewClient(ro), id: fmt.Sprintf("node-%x", rand.Uint64()), done: make(chan struct{}), ready: make(chan struct{})}
	if opts.Rows != nil {
		n.rows = opts.Rows
	}
	n.boot()
	n.srv = httptest.NewServer(http.HandlerFunc(n.serve))
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go n.listen(ctx)
	select {
	case <-n.ready:
	case <-time.After(10 * time.Second):
		n.Close()
		return nil, fmt.Errorf("node did not subscribe to the bus within 10s")
	}
	return n, nil
}

// URL is the node's base URL.
func (n *Node) URL() string { return n.srv.URL }

// Close stops the node.
func (n *Node) Close() {
	n.stop()
	<-n.done
	n.srv.Close()
	_ = n.rdb.Close()
}

// boot loads what 17.4 loads at boot: flows, permission sets, datasource
// pools; no run-time objects.
func (n *Node) boot() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.booted = time.Now()
	n.objects = map[string]map[string]any{}
	n.flows = map[string]map[string]any{}
	n.permissions = map[string]map[string]any{}
	n.pools = map[string]bool{}
	n.i18n = map[string]map[string]any{}
	if n.db == nil {
		return
	}
	n.syncTranslationsLocked()
	n.flows = n.db.all("flow")
	n.permissions = n.db.all("permission")
	for name, b := range n.db.all("datasource") {
		n.pools[name] = b["active"] != false
	}
}

// Restart simulates a process restart: uptime starts again, run-time
// objects are forgotten, flows and permission sets are reloaded.
func (n *Node) Restart() { n.boot() }

// RestartBooted is Restart by a process that takes boot to start: it
// answers 503 until its uptime reaches boot (so its first uptime may be
// above the one the old process last showed).
func (n *Node) RestartBooted(boot time.Duration) {
	n.boot()
	n.mu.Lock()
	n.bootFor = boot
	n.mu.Unlock()
}

// Uptime is how long the node has run.
func (n *Node) Uptime() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Since(n.booted)
}

// SetDown makes every route answer 503 (or serve again).
func (n *Node) SetDown(down bool) {
	n.mu.Lock()
	n.down = down
	n.mu.Unlock()
}

// Registered says whether the node serves object name.
func (n *Node) Registered(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.objects[name]
	return ok
}

// Object returns the node's in-memory copy of object name.
func (n *Node) Object(name string) map[string]any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return clone(n.objects[name])
}

// Pool says whether the node has a pool for datasource name.
func (n *Node) Pool(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pools[name]
}

func (n *Node) listen(ctx context.Context) {
	defer close(n.done)
	ps := n.rdb.Subscribe(ctx, n.opts.Prefix+"ps:metadata.mutated", n.opts.Prefix+"ps:datasource.mutated")
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions()
	subs := 0
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			switch m := m.(type) {
			case *redis.Subscription:
				if subs++; subs == 2 {
					close(n.ready)
				}
			case *redis.Message:
				if got := n.Received.Add(1); got <= int64(n.opts.DropFirst) {
					continue
				}
				if n.opts.Loss > 0 && rand.Float64() < n.opts.Loss {
					continue
				}
				n.apply(strings.TrimPrefix(m.Channel, n.opts.Prefix+"ps:"), m.Payload)
			}
		}
	}
}

// apply re-reads the row a lane message names, as 17.4's receivers do.
func (n *Node) apply(channel, msg string) {
	var env struct {
		P struct {
			OriginNode string `json:"originNode"`
			Name       string `json:"name"`
			Event      struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"event"`
		} `json:"p"`
	}
	if json.Unmarshal([]byte(msg), &env) != nil || env.P.OriginNode == n.id {
		return
	}
	switch channel {
	case "metadata.mutated":
		if env.P.Event.Type == "translation" {
			n.mu.Lock()
			n.syncTranslationsLocked()
			n.mu.Unlock()
			return
		}
		if env.P.Event.Type != "object" {
			return // flows and permission sets: only at boot
		}
		row, ok := n.rows.Get("object", env.P.Event.Name)
		n.mu.Lock()
		if ok {
			n.objects[env.P.Event.Name] = withSystemFields(row)
		} else {
			delete(n.objects, env.P.Event.Name)
		}
		n.mu.Unlock()
		if n.opts.OnApply != nil {
			n.opts.OnApply(env.P.Event.Name, row)
		}
	case "datasource.mutated":
		row, ok := n.rows.Get("datasource", env.P.Name)
		n.mu.Lock()
		n.pools[env.P.Name] = ok && row["active"] != false
		n.mu.Unlock()
	}
}

// syncTranslationsLocked re-reads every translation row, as 17.4 re-syncs
// the whole authored layer on any translation message.
func (n *Node) syncTranslationsLocked() {
	n.i18n = map[string]map[string]any{}
	if n.db == nil {
		return
	}
	for name, b := range n.db.all("translation") {
		locale, _ := b["locale"].(string)
		if locale == "" {
			locale = name
		}
		out := n.i18n[locale]
		if out == nil {
			out = map[string]any{}
			n.i18n[locale] = out
		}
		for k, v := range b {
			if k != "name" && k != "locale" {
				out[k] = v
			}
		}
	}
}

// withSystemFields adds what the platform adds to an object in memory.
func withSystemFields(body map[string]any) map[string]any {
	fields, _ := body["fields"].(map[string]any)
	if fields == nil {
		fields = map[string]any{}
		body["fields"] = fields
	}
	fields["id"] = map[string]any{"type": "text", "system": true}
	fields["created_at"] = map[string]any{"type": "datetime", "system": true}
	return body
}

func (n *Node) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && n.opts.Save != nil && strings.HasPrefix(r.URL.Path, "/api/v1/meta/object/") &&
		r.Header.Get("Authorization") == "Bearer "+n.opts.Token {
		n.Saves.Add(1)
		body, _ := io.ReadAll(r.Body)
		code := n.opts.Save(strings.TrimPrefix(r.URL.Path, "/api/v1/meta/object/"), body)
		writeJSON(w, code, map[string]any{"success": code == 200})
		return
	}
	if r.Method != http.MethodGet {
		n.Writes.Add(1)
		http.Error(w, "read-only stand-in", http.StatusMethodNotAllowed)
		return
	}
	n.mu.Lock()
	down, booted := n.down || time.Since(n.booted) < n.bootFor, n.booted
	n.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	path := r.URL.Path
	if path == "/api/v1/ready" {
		writeJSON(w, 200, map[string]any{"status": "ready"})
		return
	}
	if path == "/api/v1/health" {
		version := n.opts.Version
		if version == "" {
			version = "17.4.0"
		}
		writeJSON(w, 200, map[string]any{"status": "ok", "timestamp": time.Now().UTC(), "version": version, "uptime": time.Since(booted).Seconds()})
		return
	}
	if n.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+n.opts.Token {
		writeJSON(w, 401, map[string]any{"error": "unauthenticated"})
		return
	}
	parts := strings.Split(strings.TrimPrefix(path, "/api/v1/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "data":
		if !n.Registered(parts[1]) {
			writeJSON(w, 404, map[string]any{"error": fmt.Sprintf("Object '%s' is not registered", parts[1])})
			return
		}
		if n.opts.NoTable != nil && n.opts.NoTable(parts[1]) {
			writeJSON(w, 500, map[string]any{"error": "Internal server error", "code": "DATABASE_ERROR"})
			return
		}
		writeJSON(w, 200, map[string]any{"data": []any{}})
	case len(parts) == 4 && parts[0] == "meta" && parts[3] == "layers":
		typ, name := parts[1], parts[2]
		overlay, _ := n.rows.Get(typ, name)
		var code map[string]any
		n.mu.Lock()
		switch typ {
		case "object":
			code = clone(n.objects[name])
		case "permission":
			code = clone(n.permissions[name])
		case "flow":
			code = clone(n.flows[name])
		}
		n.mu.Unlock()
		writeJSON(w, 200, map[string]any{"type": typ, "name": name, "code": nilIfEmpty(code), "overlay": nilIfEmpty(overlay)})
	case len(parts) == 3 && parts[0] == "i18n" && parts[1] == "translations":
		n.mu.Lock()
		tr := clone(n.i18n[parts[2]])
		n.mu.Unlock()
		if tr == nil {
			tr = map[string]any{}
		}
		writeJSON(w, 200, map[string]any{"success": true, "data": map[string]any{"locale": parts[2], "translations": tr}})
	case len(parts) == 2 && parts[0] == "automation":
		n.mu.Lock()
		f, ok := n.flows[parts[1]]
		f = clone(f)
		n.mu.Unlock()
		if !ok {
			writeJSON(w, 404, map[string]any{"error": "flow not found"})
			return
		}
		writeJSON(w, 200, f)
	case len(parts) == 1 && parts[0] == "datasources":
		var list []any
		n.mu.Lock()
		for name, open := range n.pools {
			st := "unvalidated"
			if open {
				st = "ok"
			}
			list = append(list, map[string]any{"name": name, "status": st})
		}
		n.mu.Unlock()
		writeJSON(w, 200, map[string]any{"datasources": list})
	default:
		writeJSON(w, 404, map[string]any{"error": "no route"})
	}
}

func nilIfEmpty(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
