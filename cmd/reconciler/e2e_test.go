package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// upstream refuses every credential but "good".
func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func connectorBody(baseURL, ref string) string {
	b, _ := json.Marshal(map[string]any{
		"provider":       "rest",
		"providerConfig": map[string]any{"baseUrl": baseURL, "probe": map[string]string{"method": "GET", "path": "/health"}, "timeout": "5s"},
		"auth":           map[string]string{"type": "bearer", "credentialRef": ref},
		"enabled":        true,
	})
	return string(b)
}

func canaryValue() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "canary-" + hex.EncodeToString(b)
}

// allRows returns every row of table as JSON text.
func allRows(t *testing.T, url, table string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT row_to_json(r)::text FROM "+pgx.Identifier{table}.Sanitize()+" r")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// heartbeat returns replica's heartbeat row.
func heartbeat(t *testing.T, url, replica string) (stopped bool, found bool) {
	t.Helper()
	for _, line := range strings.Split(allRows(t, url, "sys_reconciler_replica"), "\n") {
		var r struct {
			ID      string `json:"replica_id"`
			Stopped any    `json:"stopped"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.ID == replica {
			return r.Stopped == true || r.Stopped == float64(1), true
		}
	}
	return false, false
}

func assertNoCanary(t *testing.T, where, text, canary string) {
	t.Helper()
	if strings.Contains(text, canary) {
		t.Errorf("canary secret found in %s", where)
	}
}

func driftFiles(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// Three daemons over one PostgreSQL hold a connector whose credential
// upstream refuses; a plain SQL update of the credential, with no signal,
// makes all three ready within two poll intervals. One is killed with
// SIGKILL, rows change, it restarts and converges. SIGTERM stops all three
// with exit 0 and stopped heartbeats. The canary secret appears nowhere.
func TestThreeDaemonsPostgres(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	up := upstream(t)
	canary := canaryValue()
	snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ('crm-token', $1), ('canary-token', $1)`, canary)
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('c1', 'connector', 'crm', $1), ('c2', 'connector', 'crm2', $2)`,
		connectorBody(up.URL, "crm-token"), connectorBody(up.URL, "canary-token"))

	const poll = 2 * time.Second
	dir := t.TempDir()
	start := func(id string) *proc {
		return startDaemon(t, daemonOpts{dir: dir, args: []string{
			"--store.url", url, "--replica_id", id, "--poll.interval", poll.String(), "--poll.jitter", "0s",
			"--hint.listen=false", "--log.level", "debug", "--drift.dir", filepath.Join(dir, "drift-"+id),
		}})
	}
	ds := []*proc{start("r1"), start("r2"), start("r3")}
	for _, d := range ds {
		eventually(t, 60*time.Second, "crm held", func() bool {
			it, ok := d.item("connector", "crm")
			return ok && it.State == "held" && it.Reason == "refused upstream: 401"
		})
	}

	snapshottest.Exec(t, url, `UPDATE sys_connector_credential SET value = 'good' WHERE ref = 'crm-token'`)
	updated := time.Now()
	for _, d := range ds {
		eventually(t, 2*poll-time.Since(updated), "crm ready on "+d.addr, func() bool {
			it, ok := d.item("connector", "crm")
			return ok && it.State == "ready"
		})
	}
	t.Logf("all three ready %s after the update (poll.interval %s)", time.Since(updated).Round(time.Millisecond), poll)

	// SIGKILL one, change rows, restart it: it converges.
	ds[2].cmd.Process.Kill()
	ds[2].wait(30 * time.Second)
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES
		('o1', 'object', 'account', '{"fields":{"name":{"type":"text"}}}'),
		('v1', 'view', 'all_accounts', '{"object":"account"}')`)
	snapshottest.Exec(t, url, `UPDATE sys_connector_credential SET value = 'bad' WHERE ref = 'crm-token'`)
	ds[2] = start("r3")
	for _, d := range ds {
		eventually(t, 60*time.Second, "converged on "+d.addr, func() bool {
			acc, ok1 := d.item("engine", "object/account")
			view, ok2 := d.item("engine", "view/all_accounts")
			crm, ok3 := d.item("connector", "crm")
			return ok1 && ok2 && ok3 && acc.State == "ready" && view.State == "ready" && crm.State == "held"
		})
	}

	// Every endpoint's answer, and a drift report written by each.
	for _, d := range ds {
		for _, p := range []string{"/v1/status", "/v1/items", "/v1/drift", "/metrics", "/healthz", "/readyz"} {
			if code, body := d.request("GET", p); code != 200 {
				t.Errorf("%s: %d %s", p, code, body)
			}
		}
		if code, body := d.request("POST", "/v1/drift"); code != 200 {
			t.Errorf("POST /v1/drift: %d %s", code, body)
		}
	}
	r := reconciler(t, dir, nil, "fleet", "--store.url", url, "--json")
	if r.code != 0 {
		t.Fatalf("fleet: %d %s", r.code, r.stderr)
	}
	var fv fleet.View
	if err := json.Unmarshal([]byte(r.stdout), &fv); err != nil || len(fv.Replicas) != 3 {
		t.Fatalf("fleet: %v\n%s", err, r.stdout)
	}
	if r := reconciler(t, dir, nil, "fleet", "--store.url", url); r.code != 0 || !strings.Contains(r.stdout, "r3") {
		t.Fatalf("fleet table: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	for _, d := range ds {
		d.signal(syscall.SIGTERM)
	}
	for i, d := range ds {
		if code := d.wait(60 * time.Second); code != 0 {
			t.Errorf("r%d exited %d", i+1, code)
		}
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		if stopped, ok := heartbeat(t, url, id); !ok || !stopped {
			t.Errorf("%s heartbeat: found %v stopped %v", id, ok, stopped)
		}
	}
	for i, d := range ds {
		assertNoCanary(t, fmt.Sprintf("r%d logs", i+1), d.out.String(), canary)
		assertNoCanary(t, fmt.Sprintf("r%d HTTP responses", i+1), d.bodies.String(), canary)
		assertNoCanary(t, fmt.Sprintf("r%d drift files", i+1), driftFiles(t, filepath.Join(dir, fmt.Sprintf("drift-r%d", i+1))), canary)
	}
	assertNoCanary(t, "heartbeat rows", allRows(t, url, "sys_reconciler_replica"), canary)
	assertNoCanary(t, "drift rows", allRows(t, url, "sys_reconciler_drift"), canary)
	if !strings.Contains(ds[0].out.String(), `"level":"DEBUG"`) {
		t.Error("no debug lines: the canary check did not run at debug")
	}
}

// With poll.interval=1h nothing is polled: SIGHUP applies a changed row,
// also after a bad config file is rejected; SIGUSR2 writes a drift report;
// the CLI reaches the daemon with its token; SIGTERM exits 0 with a
// stopped heartbeat.
func TestSignalsPostgres(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	dir := t.TempDir()
	good := fmt.Sprintf(`store:
  url: %q
poll:
  interval: 1h
resync:
  interval: 0s
hint:
  listen: false
drift:
  schedule: ""
  dir: ./drift
status:
  token_env: E2E_TOKEN
replica_id: sig
`, url)
	writeConfig(t, dir, good)
	env := []string{"E2E_TOKEN=tok-e2e"}
	d := startDaemon(t, daemonOpts{dir: dir, env: env, token: "tok-e2e", args: []string{"--config", "config.yaml"}})
	eventually(t, 60*time.Second, "ready", func() bool { code, _ := d.request("GET", "/readyz"); return code == 200 })

	// The token is required.
	d.token = ""
	if code, _ := d.request("GET", "/v1/status"); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	d.token = "tok-e2e"

	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('o1', 'object', 'account', '{"fields":{}}')`)
	if _, ok := d.item("engine", "object/account"); ok {
		t.Fatal("applied without a poll or a signal")
	}
	d.signal(syscall.SIGHUP)
	took := eventually(t, 5*time.Second, "applied after SIGHUP", func() bool {
		it, ok := d.item("engine", "object/account")
		return ok && it.State == "ready"
	})
	t.Logf("applied %s after SIGHUP", took.Round(time.Millisecond))

	// The metric names of the contract, with their labels.
	code, metrics := d.request("GET", "/metrics")
	for _, want := range []string{
		`reconciler_materializations_total{kind="engine",result="ready"} 1`,
		`reconciler_evictions_total{kind="connector"} 0`,
		`reconciler_passes_total{trigger="trigger"}`,
		`reconciler_items{kind="engine",state="ready"} 1`,
		`reconciler_cursor_lag_seconds `,
		`reconciler_poll_duration_seconds_count `,
	} {
		if code != 200 || !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}

	// A bad file is rejected, the old configuration kept, and SIGHUP still
	// reconciles.
	writeConfig(t, dir, good+"bogus_key: 1\n")
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('v1', 'view', 'all_accounts', '{"object":"account"}')`)
	d.signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "reload rejected", func() bool {
		return strings.Contains(d.out.String(), "config reload rejected") && strings.Contains(d.out.String(), "bogus_key")
	})
	eventually(t, 5*time.Second, "applied after a rejected reload", func() bool {
		it, ok := d.item("engine", "view/all_accounts")
		return ok && it.State == "ready"
	})

	writeConfig(t, dir, good)

	d.signal(syscall.SIGUSR2)
	latest := filepath.Join(dir, "drift", "latest.json")
	eventually(t, 10*time.Second, "drift report written", func() bool {
		_, err := os.Stat(latest)
		return err == nil && strings.Contains(allRows(t, url, "sys_reconciler_drift"), `"sig"`)
	})
	var rep struct {
		Replica string `json:"replica"`
		Summary struct {
			Ready int `json:"ready"`
		} `json:"summary"`
	}
	data, _ := os.ReadFile(latest)
	if err := json.Unmarshal(data, &rep); err != nil || rep.Replica != "sig" {
		t.Fatalf("latest.json: %v %s", err, data)
	}
	stamped, _ := filepath.Glob(filepath.Join(dir, "drift", "drift-*.json"))
	if len(stamped) == 0 {
		t.Fatal("no timestamped drift file")
	}

	// An item of an organization and a package: items --json carries the
	// key's parts as fields.
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata, organization_id, package_id)
VALUES ('v2', 'view', 'open/all', '{"object":"account"}', 'acme:eu', 'crm')`)
	d.signal(syscall.SIGHUP)
	const orgView = "acme%3Aeu:view/open%2Fall@crm"
	eventually(t, 10*time.Second, "the organization's view applied", func() bool {
		it, ok := d.item("engine", orgView)
		return ok && it.State == "ready"
	})
	r := reconciler(t, dir, env, "items", "--kind", "engine", "--json", "--config", "config.yaml", "--addr", d.addr)
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &listed); r.code != 0 || err != nil {
		t.Fatalf("items --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	parts := map[string][4]string{}
	for _, it := range listed {
		var p [4]string
		for i, f := range []string{"org", "type", "name", "package"} {
			p[i], _ = it[f].(string)
		}
		parts[it["key"].(string)] = p
	}
	if want := [4]string{"acme:eu", "view", "open/all", "crm"}; parts[orgView] != want {
		t.Errorf("items --json: %s has parts %q, want %q", orgView, parts[orgView], want)
	}
	if want := [4]string{"", "object", "account", ""}; parts["object/account"] != want {
		t.Errorf("items --json: object/account has parts %q, want %q", parts["object/account"], want)
	}

	// The CLI finds the daemon through --addr and sends the token.
	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"items"}, {"items", "--kind", "engine", "--json"},
		{"drift"}, {"drift", "--json"}, {"trigger"}, {"trigger", "--resync"}, {"trigger", "--drift", "--json"},
	} {
		r := reconciler(t, dir, env, append(args, "--config", "config.yaml", "--addr", d.addr)...)
		if r.code != 0 {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := reconciler(t, dir, nil, "status", "--config", "config.yaml", "--addr", d.addr); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Errorf("status without the token: exit %d %s", r.code, r.stderr)
	}

	d.signal(syscall.SIGTERM)
	if code := d.wait(60 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if stopped, ok := heartbeat(t, url, "sig"); !ok || !stopped {
		t.Fatalf("heartbeat found %v stopped %v", ok, stopped)
	}
}
