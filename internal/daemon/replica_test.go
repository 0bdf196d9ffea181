package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// With replica.url set, an applied change reaches the replica through its
// lane, /v1/items shows the entry's replica state, /v1/status and drift
// summarize it, and the metrics count it.
func TestReplicaDriven(t *testing.T) {
	rd, err := replicatest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	db := replicatest.NewDB()
	node, err := replicatest.Start(db, replicatest.Options{BusURL: rd.URL(), Token: "osk_daemon-canary"})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()

	cfg := testConfig(t, "replica_id: unit\npoll:\n  interval: 50ms\nreplica:\n  url: "+node.URL()+
		"\n  token_env: OS_TOKEN\n  bus:\n    url: "+rd.URL()+"\n")
	_, addr, stop := started(t, Options{Config: cfg, Version: "test",
		Getenv: func(k string) string {
			if k == "OS_TOKEN" {
				return "osk_daemon-canary"
			}
			return ""
		}})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	body := `{"name":"task","label":"Task","fields":{"subject":{"type":"text","label":"Subject"}}}`
	var obj map[string]any
	_ = json.Unmarshal([]byte(body), &obj)
	db.Put("object", "task", obj)
	// snapshottest opens SQLite with a busy timeout: the daemon writes the
	// same file (a bare sql.Open failed once with SQLITE_BUSY).
	store := snapshottest.Connect(t, cfg.StoreURL)
	// The object's table, as the platform creates it: the sidecar reads
	// the store's catalog to tell a servable object.
	store.Exec(t, `CREATE TABLE task (id TEXT PRIMARY KEY, created_at TEXT, updated_at TEXT, subject TEXT)`)
	store.Exec(t, `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ('m1', 'object', 'task', 'active', $1)`, body)

	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	get := func(path string) string {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var items []struct {
			Key     string `json:"key"`
			Replica *struct {
				State    string `json:"state"`
				Attempts int    `json:"attempts"`
			} `json:"replica"`
		}
		if err := json.Unmarshal([]byte(get("/v1/items?kind=engine")), &items); err != nil {
			t.Fatal(err)
		}
		if len(items) == 1 && items[0].Replica != nil && items[0].Replica.State == "in-sync" {
			if items[0].Replica.Attempts != 1 || !node.Registered("task") {
				t.Fatalf("in-sync after %d messages, registered %v", items[0].Replica.Attempts, node.Registered("task"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not in-sync: %+v", items)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var st struct {
		Replica     string `json:"replica"`
		ReplicaSync struct {
			Counts    map[string]int `json:"counts"`
			Reachable bool           `json:"reachable"`
			Restart   *struct {
				Phase   string `json:"phase"`
				Enabled bool   `json:"enabled"`
			} `json:"restart"`
		} `json:"replica_sync"`
	}
	if err := json.Unmarshal([]byte(get("/v1/status")), &st); err != nil || st.ReplicaSync.Counts["in-sync"] != 1 || !st.ReplicaSync.Reachable || st.Replica == "" {
		t.Fatalf("/v1/status replica: %v %+v", err, st)
	}
	// Restarts are off without replica.restart.command; the heartbeat
	// carries the node's readiness all the same.
	if r := st.ReplicaSync.Restart; r == nil || r.Phase != "off" || r.Enabled {
		t.Fatalf("/v1/status restart: %+v", r)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		if store.Int(t, `SELECT count(*) FROM sys_reconciler_replica WHERE replica_id = 'unit' AND node LIKE '%"reported":true,"ready":true%'`) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat does not report a ready node")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var dr struct {
		ReplicaSync *struct {
			Lagging []any `json:"lagging"`
		} `json:"replica_sync"`
	}
	if err := json.Unmarshal([]byte(get("/v1/drift")), &dr); err != nil || dr.ReplicaSync == nil || len(dr.ReplicaSync.Lagging) != 0 {
		t.Fatalf("/v1/drift replica_sync: %v %+v", err, dr)
	}
	m := get("/metrics")
	for _, want := range []string{`reconciler_replica_publishes_total{channel="metadata.mutated",result="ok"} 1`,
		`reconciler_replica_verifications_total{result="in-sync"}`, `reconciler_replica_entries{state="in-sync"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, out := range []string{m, get("/v1/items"), get("/v1/status")} {
		if strings.Contains(out, "osk_daemon-canary") {
			t.Fatal("the replica token is shown")
		}
	}
}

// Without replica.url nothing changes, but the replica metric families
// exist from the start.
func TestReplicaMetricsWithoutReplica(t *testing.T) {
	cfg := testConfig(t, "poll:\n  interval: 50ms\n")
	addrc := make(chan string, 1)
	d := New(Options{Config: cfg, Started: func(a string) { addrc <- a }})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	addr := <-addrc
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, fam := range []string{"reconciler_replica_publishes_total", "reconciler_replica_verifications_total",
		"reconciler_replica_restarts_total", "reconciler_replica_nudges_total", "reconciler_replica_bus_messages_total", "reconciler_replica_entries",
		"reconciler_replica_restart_phase", "reconciler_replica_restart_runs_total", "reconciler_replica_restart_refusals_total", "reconciler_replica_no_lanes"} {
		if !strings.Contains(string(b), fam) {
			t.Errorf("/metrics lacks %s", fam)
		}
	}
	resp, err = client.Get("http://" + addr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), `"replica_sync"`) {
		t.Fatalf("status has a replica part without replica.url: %s", b)
	}
}

func TestReplicaTokenEnvMustBeSet(t *testing.T) {
	cfg := testConfig(t, "replica:\n  url: http://127.0.0.1:1\n  token_env: OS_TOKEN\n  bus:\n    url: redis://127.0.0.1:1\n")
	err := New(Options{Config: cfg, Getenv: func(string) string { return "" }}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "replica.token_env") {
		t.Fatalf("Run: %v", err)
	}
}
