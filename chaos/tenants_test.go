package chaos

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/ossecret"
	"github.com/objectstack-fleet/reconciler/internal/pgfake"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// upsertOrgMetadata writes a sys_metadata row of an organization: $1 id,
// $2 type, $3 name, $4 organization_id (nil: NULL), $5 body.
const upsertOrgMetadata = `INSERT INTO sys_metadata (id, type, name, organization_id, metadata) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET metadata = EXCLUDED.metadata, state = 'active', version = sys_metadata.version + 1`

// TestChaosTenants attacks one daemon as a tenant (org evil) beside a
// victim (org acme) and the platform (no org): rows naming the victim's
// and the platform's credentials with hosts the attacker controls,
// directly, through a sys_secret id and through a borrowed connector,
// against servers that ask for the password in cleartext; and rows that
// each stay within the per-row pool cap but together would exhaust the
// store's server. Counted: credentials and passwords received by the
// attacker's hosts, and the connections the pools opened.
func TestChaosTenants(t *testing.T) {
	t.Parallel()
	pgURL := snapshottest.NewPostgresURL(t)
	r := newRig(t, "tenants")
	keyHex := randomHex(32)
	key, err := ossecret.ParseKey(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	foreign := newForeignHost(t)
	home := okUpstream(t)
	fakePG := pgfake.StartCleartext(t)

	// The victim and the platform.
	snapshottest.Exec(t, pgURL, upsertCredential, "acme-token", canary)
	snapshottest.Exec(t, pgURL, upsertCredential, "platform-token", canary)
	sealed, err := ossecret.Encrypt(key, "datasource", "acme_db", canary)
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Exec(t, pgURL, `INSERT INTO sys_secret (id, organization_id, namespace, key, kms_key_id, alg, version, ciphertext)
VALUES ($1, 'acme', 'datasource', 'acme_db', 'local:v1', 'aes-256-gcm', 1, $2)`, sealed.ID, sealed.Ciphertext)
	snapshottest.Exec(t, pgURL, upsertOrgMetadata, "c-acme", "connector", "crm", "acme", connectorBody(home.URL, "acme-token", "5s"))
	snapshottest.Exec(t, pgURL, upsertOrgMetadata, "c-plat", "connector", "platform_api", nil, connectorBody(home.URL, "platform-token", "5s"))
	fake := fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"database":"d","username":"u"}`, fakePG.Port())
	// acme's own datasource at a server asking for the password in
	// cleartext (a MITM on an sslmode=prefer path looks the same).
	snapshottest.Exec(t, pgURL, upsertOrgMetadata, "d-acme", "datasource", "acme_db", "acme",
		dsRecord("acme_db", "postgres", fake, `{}`, fmt.Sprintf(`{"credentialsRef":"sys_secret:%s"}`, sealed.ID)))
	results.wrote(6)

	d := r.newDaemon("tenants", withApp(pgURL, "chaos-tenants"), set("drift.schedule", ""))
	d.env = []string{"OS_SECRET_KEY=" + keyHex}
	d.start()
	waitSettled(t, d, "the owners' rows applied", 3,
		func(it item) bool {
			return it.Key == "acme:crm" || it.Key == "platform_api" || it.Key == "acme:acme_db"
		},
		func(it item) bool { return it.State == "ready" || it.State == "held" })
	after := func(attack, measure, got, bound string) {
		fds, rss := procFigures(d.pid())
		hostileResults.add(hostileRow{attack: attack, measure: measure, got: got, bound: bound, fds: fds, rssMiB: rss})
		t.Logf("%s: %s = %s (bound %s); fds %d, RSS %.0f MiB", attack, measure, got, bound, fds, rss)
	}

	// The attacks of org evil.
	attacks := map[string]struct{ typ, name, body, reason string }{
		"e1": {"connector", "steal", connectorBody(foreign.URL, "acme-token", "5s"), "credential acme-token is bound to another organization"},
		"e2": {"connector", "grab", strings.Replace(connectorBody(foreign.URL, "platform-token", "5s"), `"type":"bearer"`, `"header":"X-Grab","type":"api-key"`, 1),
			"credential platform-token is bound to another organization"},
		"e3": {"datasource", "acme_db", dsRecord("acme_db", "postgres", fake, `{}`, fmt.Sprintf(`{"credentialsRef":"sys_secret:%s"}`, sealed.ID)),
			"does not serve this entry"},
		"e4": {"datasource", "borrow", dsRecord("borrow", "postgres", fake, `{}`, `{"connector":"platform_api"}`),
			"credential platform-token is bound to another organization"},
	}
	for id, a := range attacks {
		snapshottest.Exec(t, pgURL, upsertOrgMetadata, id, a.typ, a.name, "evil", a.body)
	}
	results.wrote(int64(len(attacks)))
	waitSettled(t, d, "the tenant's rows settled", len(attacks),
		func(it item) bool { return strings.HasPrefix(it.Key, "evil:") },
		func(it item) bool { return it.State != "pending" })
	its, _ := d.items()
	for _, it := range its {
		if strings.HasPrefix(it.Key, "evil:") {
			t.Logf("%s/%s: %s %q", it.Kind, it.Key, it.State, it.Reason)
			ok := false
			for _, a := range attacks {
				ok = ok || it.Key == "evil:"+a.name && it.Kind == a.typ && it.State == "held" && strings.Contains(it.Reason, a.reason)
			}
			if !ok {
				t.Errorf("%s/%s: %s %q, want held naming the rule", it.Kind, it.Key, it.State, it.Reason)
			}
		}
		if it.Key == "acme:crm" && it.State != "ready" || it.Key == "platform_api" && it.State != "ready" {
			t.Errorf("the owner's %s: %s %q, want ready", it.Key, it.State, it.Reason)
		}
		if it.Key == "acme:acme_db" && (it.State != "held" || !strings.Contains(it.Reason, "in cleartext over an unencrypted connection")) {
			t.Errorf("acme's datasource at a cleartext server: %s %q, want held naming the rule", it.State, it.Reason)
		}
	}
	after("org `evil` rows using org `acme`'s credential ref, the platform's ref (api-key), `acme`'s sys_secret id and the platform's connector (borrowed), with hosts the attacker runs (an HTTP capture, a PostgreSQL server asking for the password in cleartext)",
		"credentials received by the attacker's HTTP host; passwords received by its PostgreSQL server",
		fmt.Sprintf("%d; %d", foreign.credentials.Load(), fakePG.Passwords()), "0; 0")
	if n, p := foreign.credentials.Load(), fakePG.Passwords(); n != 0 || p != 0 {
		t.Errorf("the attacker received %d credentials and %d passwords", n, p)
	}

	// Pools: three rows at the per-row cap (min = max = 50) against the
	// store's own server; the sidecar's budget is 16.
	pu, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Exec(t, pgURL, `DO $$ BEGIN CREATE ROLE chaos_tenant_pool LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`)
	snapshottest.Exec(t, pgURL, upsertCredential, "evil-db", "unused")
	poolConfig := fmt.Sprintf(`{"host":%q,"port":%s,"database":%q,"username":"chaos_tenant_pool","sslmode":"disable"}`,
		pu.Hostname(), pu.Port(), strings.TrimPrefix(pu.Path, "/"))
	for i := range 3 {
		name := fmt.Sprintf("pool%d", i)
		snapshottest.Exec(t, pgURL, upsertOrgMetadata, "p"+name, "datasource", name, "evil",
			dsRecord(name, "postgres", poolConfig, `{"minConns":50,"maxConns":50}`, `{"credentialsRef":"evil-db"}`))
	}
	results.wrote(3)
	waitSettled(t, d, "the pool rows settled", 3,
		func(it item) bool { return strings.HasPrefix(it.Key, "evil:pool") },
		func(it item) bool { return it.State == "ready" || it.State == "held" })
	backends := func() int {
		db, err := openDB(pgURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE usename = 'chaos_tenant_pool'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var peak int
	eventually(t, "the pools' min connections open", func() bool { peak = max(peak, backends()); return peak >= 16 })
	its, _ = d.items()
	heldBudget := 0
	for _, it := range its {
		if strings.HasPrefix(it.Key, "evil:pool") {
			t.Logf("%s: %s %q", it.Key, it.State, it.Reason)
			if it.State == "held" && strings.Contains(it.Reason, "datasource.max_total_conns") {
				heldBudget++
			}
		}
	}
	after("3 org `evil` datasource rows at the per-row cap (pool min = max = 50) against the store's own server",
		"connections the pools opened; rows held naming the budget", fmt.Sprintf("%d; %d", peak, heldBudget), "≤ 16 (`datasource.max_total_conns`); 2 (the first reserves the budget: its min shrinks to 16)")
	if peak > 16 {
		t.Errorf("the pools opened %d connections, above the budget of 16", peak)
	}
	snapshottest.Exec(t, pgURL, `DELETE FROM sys_metadata WHERE id LIKE 'ppool%'`)
	results.wrote(3)
	eventually(t, "the pools closed", func() bool { return backends() == 0 })

	// Five org evil connectors whose upstream hangs (each up to
	// apply.timeout, 5s here), then an org acme object.
	hang := make(chan struct{})
	hanger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hanger.Close)
	t.Cleanup(func() { close(hang) })
	for i := range 5 {
		snapshottest.Exec(t, pgURL, upsertOrgMetadata, fmt.Sprintf("hang%d", i), "connector", fmt.Sprintf("hang%d", i), "evil",
			fmt.Sprintf(`{"provider":"rest","providerConfig":{"baseUrl":%q,"timeout":"1h"},"auth":{"type":"none"},"enabled":true}`, hanger.URL))
	}
	results.wrote(5)
	waitSettled(t, d, "the hanging connectors are tried", 5,
		func(it item) bool { return strings.HasPrefix(it.Key, "evil:hang") },
		func(it item) bool { return true })
	t0 := time.Now()
	snapshottest.Exec(t, pgURL, upsertOrgMetadata, "acme-obj", "object", "invoice", "acme", `{"fields":{"name":{"type":"text"}}}`)
	results.wrote(1)
	waitSettled(t, d, "acme's object applied", 1,
		func(it item) bool { return it.Key == "acme:object/invoice" },
		func(it item) bool { return it.State == "ready" })
	delay := time.Since(t0)
	after("5 org `evil` connectors whose upstream hangs (apply.timeout 5s, apply.concurrency 4), then an org `acme` object",
		"commit → acme's object ready (poll.interval 100ms)", delay.Round(10*time.Millisecond).String(),
		"about a poll interval + the pass budget (1s); was 46 s in the review")

	// A NOTIFY flood from a role that can connect: hint passes counted.
	hintPasses := func() float64 {
		_, b, err := d.request("GET", "/metrics", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, `reconciler_passes_total{trigger="hint"} `); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return 0
	}
	before := hintPasses()
	flood := time.Now()
	snapshottest.Exec(t, pgURL, `DO $$ BEGIN FOR i IN 1..20000 LOOP PERFORM pg_notify('reconciler', 'x' || i); END LOOP; END $$`)
	for range 20 {
		snapshottest.Exec(t, pgURL, `DO $$ BEGIN FOR i IN 1..1000 LOOP PERFORM pg_notify('reconciler', 'y' || i); END LOOP; END $$`)
	}
	floodFor := time.Since(flood)
	eventually(t, "the hint passes of the flood counted", func() bool { return hintPasses() > before })
	hints := hintPasses() - before
	after(fmt.Sprintf("40,000 `NOTIFY reconciler` (%v) from a role that can connect", floodFor.Round(10*time.Millisecond)),
		"hint passes", fmt.Sprintf("%.0f", hints), "one per hint spacing (poll.interval/10 = 50 ms here, at most 1 s); 8,640 in 3 s in the review")
	if limit := floodFor.Seconds()/0.05 + 5; hints > limit {
		t.Errorf("%.0f hint passes in %v, above %.0f", hints, floodFor, limit)
	}

	// Idle connections to the status port, then a change that needs a
	// descriptor.
	var idle []net.Conn
	for range 2000 {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			break
		}
		idle = append(idle, c)
	}
	fdsIdle, _ := procFigures(d.pid())
	snapshottest.Exec(t, pgURL, upsertOrgMetadata, "c-acme2", "connector", "crm2", "acme", connectorBody(home.URL, "acme-token", "5s"))
	results.wrote(1)
	for _, c := range idle {
		c.Close()
	}
	waitSettled(t, d, "acme's new connector applied", 1,
		func(it item) bool { return it.Key == "acme:crm2" },
		func(it item) bool { return it.State == "ready" })
	after(fmt.Sprintf("%d idle TCP connections to the status port, then a new connector", len(idle)),
		"daemon fds while they were open", fmt.Sprint(fdsIdle), "≤ 256 for the API (statusapi.MaxConns) + the daemon's own; the review's 20,000 exhausted the fds")
	if fdsIdle > 400 {
		t.Errorf("%d fds with idle connections open", fdsIdle)
	}

	// A row name with bidi and separator characters, on the page.
	snapshottest.Exec(t, pgURL, upsertOrgMetadata, "bidi", "view", "gnp\u202e.exe\u2028x", "evil", `{"object":"nothing"}`)
	results.wrote(1)
	waitSettled(t, d, "the bidi row applied", 1,
		func(it item) bool { return strings.Contains(it.Key, "gnp") },
		func(it item) bool { return it.State != "pending" })
	_, page, err := d.request("GET", "/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.Count(string(page), "\u202e") + strings.Count(string(page), "\u2028")
	after("a row named with U+202E and U+2028, on the status page", "raw bidi/separator characters in the HTML", fmt.Sprint(raw), "0 (shown as `\\u202e` text)")
	if raw != 0 {
		t.Errorf("%d raw bidi characters on the page", raw)
	}
}
