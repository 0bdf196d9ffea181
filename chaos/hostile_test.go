package chaos

import (
	"bufio"
	"context"
	bin "encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// jsonType is the header every mutating request of the API needs.
var jsonType = map[string]string{"Content-Type": "application/json"}

// hostile collects the figures of the hostile-rows and hostile-client
// phase: one line per attack, with what was counted and its bound.
type hostile struct {
	mu   sync.Mutex
	rows []hostileRow
}

type hostileRow struct {
	attack, measure string
	got             string
	bound           string
	fds             int
	rssMiB          float64
}

var hostileResults = &hostile{}

// The key-collision attack (TestChaosKeyCollisions) and what it counts.
const (
	collisionAttack  = "rows mimicking another organization's keys (`acme:crm` without an org, type `acme:object`, org `a:b` vs `a` + `b:object`, `p/q` vs type `object/p`)"
	collisionMeasure = "rows without an entry of their own; real entries evicted by deleting the impostors"
)

func (h *hostile) add(r hostileRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rows = append(h.rows, r)
}

func (h *hostile) markdown() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Hostile rows and clients\n\n")
	b.WriteString("One daemon (`reconciler run`, PostgreSQL store through a counting relay) attacked by rows an organization can write and by requests a local process or a web page can send. fds and RSS are the daemon's (`/proc/PID`) right after each attack.\n\n")
	b.WriteString("| attack | counted | result | bound | fds | RSS MiB |\n|---|---|---|---|---|---|\n")
	rows := h.rows
	if !slices.ContainsFunc(rows, func(r hostileRow) bool { return r.attack == collisionAttack }) {
		rows = append(slices.Clone(rows), hostileRow{attack: collisionAttack, measure: collisionMeasure, got: "not run yet (TestChaosKeyCollisions lands with the key format change)", bound: "0; 0"})
	}
	for _, r := range rows {
		fds, rss := "–", "–"
		if r.fds > 0 {
			fds, rss = strconv.Itoa(r.fds), fmt.Sprintf("%.0f", r.rssMiB)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.attack, r.measure, r.got, r.bound, fds, rss)
	}
	return b.String()
}

// waitSettled waits until the daemon has n items that are ours, each done.
func waitSettled(t *testing.T, d *daemon, what string, n int, ours, done func(item) bool) {
	t.Helper()
	eventually(t, what, func() bool {
		its, err := d.items()
		if err != nil {
			return false
		}
		c := 0
		for _, it := range its {
			if ours(it) {
				if !done(it) {
					return false
				}
				c++
			}
		}
		return c == n
	})
}

// procFigures returns the open fds and resident memory of pid.
func procFigures(pid int) (fds int, rssMiB float64) {
	if es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		fds = len(es)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return fds, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			rssMiB = kb / 1024
		}
	}
	return fds, rssMiB
}

func (d *daemon) pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd.Process.Pid
}

// pgRelay forwards TCP connections to a PostgreSQL server and counts the
// DataRow messages the server sends: every row the daemon reads.
type pgRelay struct {
	ln       net.Listener
	target   string
	dataRows atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newPGRelay(t *testing.T, target string) *pgRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &pgRelay{ln: ln, target: target}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *pgRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, s)
		r.mu.Unlock()
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			_, _ = io.Copy(s, c)
			s.Close()
			c.Close()
		}()
		go func() {
			defer r.wg.Done()
			r.countRows(c, s)
			s.Close()
			c.Close()
		}()
	}
}

// countRows copies the server's messages to the client, counting 'D'
// (DataRow). The daemon connects without TLS, so every server message is
// a type byte and a length.
func (r *pgRelay) countRows(c, s net.Conn) {
	in := bufio.NewReaderSize(s, 64<<10)
	out := bufio.NewWriterSize(c, 64<<10)
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(in, hdr); err != nil {
			return
		}
		if hdr[0] == 'D' {
			r.dataRows.Add(1)
		}
		n := int64(bin.BigEndian.Uint32(hdr[1:])) - 4
		if _, err := out.Write(hdr); err != nil {
			return
		}
		if _, err := io.CopyN(out, in, n); err != nil {
			return
		}
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return
			}
		}
	}
}

func (r *pgRelay) close() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// through returns rawURL with its host replaced by the relay's.
func (r *pgRelay) through(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	u.Host = r.ln.Addr().String()
	// The relay reads the server's messages in plain text: no TLS, whatever
	// the test's URL says (an SSLRequest's one-byte answer has no length).
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// foreignHost counts requests and credentials it receives: it stands for
// a host a row names that is not its connector's upstream.
type foreignHost struct {
	*httptest.Server
	requests, credentials atomic.Int64
}

func newForeignHost(t *testing.T) *foreignHost {
	f := &foreignHost{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		got := r.Header.Get("Authorization") != ""
		for _, vs := range r.Header {
			for _, v := range vs {
				got = got || strings.Contains(v, canary)
			}
		}
		if got {
			f.credentials.Add(1)
		}
		_, _ = io.WriteString(w, `{"openapi":"3.0.0","paths":{}}`)
	}))
	t.Cleanup(f.Close)
	return f
}

// TestChaosHostile attacks one daemon with hostile rows and a hostile
// client and counts what got through: credentials received by a foreign
// host, files created outside the allowed paths, connections opened to a
// silent server, requests from rebound names and cross-site pages that
// were served, and store reads per 20 concurrent drift requests. fds and
// RSS are read after each attack.
func TestChaosHostile(t *testing.T) {
	t.Parallel()
	pgURL := snapshottest.NewPostgresURL(t)
	r := newRig(t, "hostile")
	pu, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	relay := newPGRelay(t, pu.Host)
	const seeded = 3000
	snapshottest.Exec(t, pgURL, `INSERT INTO sys_metadata (id, type, name, metadata)
SELECT 'object:h' || i, 'object', 'h' || i, '{"fields":{"name":{"type":"text"}}}' FROM generate_series(1, $1::int) i`, seeded)
	snapshottest.Exec(t, pgURL, upsertCredential, "hcred", canary)
	snapshottest.Exec(t, pgURL, upsertCredential, "hbasic", "svc:"+canary)
	results.wrote(seeded + 2)

	// SQLite datasources are allowed in one directory, so that the file
	// attacks below meet the confinement rather than a refusal of SQLite.
	allowed := filepath.Join(r.dir, "allowed")
	if err := os.MkdirAll(allowed, 0o755); err != nil {
		t.Fatal(err)
	}
	d := r.newDaemon("hostile", withApp(relay.through(pgURL), "chaos-hostile"), set("drift.schedule", ""), set("datasource.sqlite_dir", allowed))
	d.start()
	r.converge(pgURL, d)
	after := func(attack, measure, got, bound string) {
		fds, rss := procFigures(d.pid())
		hostileResults.add(hostileRow{attack: attack, measure: measure, got: got, bound: bound, fds: fds, rssMiB: rss})
		t.Logf("%s: %s = %s (bound %s); fds %d, RSS %.0f MiB", attack, measure, got, bound, fds, rss)
	}
	after("none (3,000 rows synced)", "–", "–", "–")

	// Rows that name another host for the connector's credential.
	foreign := newForeignHost(t)
	home := okUpstream(t)
	redirector := httptest.NewServer(http.RedirectHandler(foreign.URL+"/steal", http.StatusFound))
	t.Cleanup(redirector.Close)
	foreignHostPort := strings.TrimPrefix(foreign.URL, "http://")
	conn := func(provider, base, probe, spec, auth string) string {
		pc := fmt.Sprintf(`"baseUrl":%q`, base)
		if probe != "" {
			pc += fmt.Sprintf(`,"probe":{"method":"GET","path":%q}`, probe)
		}
		if spec != "" {
			pc += fmt.Sprintf(`,"specUrl":%q`, spec)
		}
		return fmt.Sprintf(`{"provider":%q,"providerConfig":{%s},"auth":%s,"enabled":true}`, provider, pc, auth)
	}
	bearer := `{"type":"bearer","credentialRef":"hcred"}`
	hostileConnectors := map[string]string{
		"steal_probe":      conn("rest", home.URL, foreign.URL+"/steal", "", bearer),
		"steal_relative":   conn("rest", home.URL, "//"+foreignHostPort+"/steal", "", bearer),
		"steal_spec":       conn("openapi", home.URL, "", foreign.URL+"/openapi.json", bearer),
		"steal_apikey":     conn("openapi", home.URL, "", foreign.URL+"/openapi.json", `{"type":"api-key","credentialRef":"hcred","header":"X-Steal"}`),
		"steal_basic":      conn("rest", home.URL, foreign.URL+"/steal", "", `{"type":"basic","credentialRef":"hbasic"}`),
		"steal_downgrade":  conn("rest", "https://"+strings.TrimPrefix(home.URL, "http://"), home.URL+"/health", "", bearer),
		"steal_redirected": conn("rest", redirector.URL, "/health", "", bearer),
	}
	for name, body := range hostileConnectors {
		snapshottest.Exec(t, pgURL, upsertMetadata, "connector:"+name, "connector", name, body)
	}
	results.fault("hostile rows")
	results.wrote(int64(len(hostileConnectors)))
	waitSettled(t, d, "hostile connectors settled", len(hostileConnectors),
		func(it item) bool { return it.Kind == "connector" && strings.Contains(it.Key, "steal_") },
		func(it item) bool { return it.State != "pending" })
	its, _ := d.items()
	for _, it := range its {
		if strings.Contains(it.Key, "steal_") {
			t.Logf("%s: %s %q", it.Key, it.State, it.Reason)
			if it.State != "held" || !strings.Contains(it.Reason, "outside the origin") && !strings.Contains(it.Reason, "answered 302") {
				t.Errorf("%s held for %q, want the origin named", it.Key, it.Reason)
			}
		}
	}
	after("connector rows sending the credential elsewhere (absolute and scheme-relative probe, spec URL, api-key, basic, https→http, redirect)",
		"credentials received by the foreign host", fmt.Sprint(foreign.credentials.Load()), "0")
	if n := foreign.credentials.Load(); n != 0 {
		t.Errorf("the foreign host received the credential %d times", n)
	}

	// Rows that name files outside what the datasource kind allows, with
	// pragmas.
	outside := filepath.Join(r.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	type dsRow struct{ driver, config, pool string }
	dsRows := map[string]dsRow{
		"file_abs":    {"sqlite", fmt.Sprintf(`{"path":%q}`, filepath.Join(outside, "abs.db")), `{}`},
		"file_uri":    {"sqlite", fmt.Sprintf(`{"path":%q}`, "file:"+filepath.Join(outside, "uri.db")+"?_pragma=journal_mode(WAL)&mode=rwc"), `{}`},
		"file_dotdot": {"sqlite", fmt.Sprintf(`{"path":%q}`, "../../../../../../.."+filepath.Join(outside, "dotdot.db")), `{}`},
		"file_name":   {"sqlite", fmt.Sprintf(`{"filename":%q}`, filepath.Join(outside, "filename.db")), `{}`},
		"file_pragma": {"sqlite", `{"path":"x.db?_pragma=writable_schema(1)"}`, `{}`},
	}
	// A pool that would open thousands of sockets to a server that never
	// answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var silentConns atomic.Int64
	var silentWG sync.WaitGroup
	var held0 sync.Mutex
	var heldConns []net.Conn
	silentWG.Add(1)
	go func() {
		defer silentWG.Done()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			silentConns.Add(1)
			held0.Lock()
			heldConns = append(heldConns, c)
			held0.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		silentWG.Wait()
		held0.Lock()
		for _, c := range heldConns {
			c.Close()
		}
		held0.Unlock()
	})
	_, silentPort, _ := net.SplitHostPort(silent.Addr().String())
	silentConfig := fmt.Sprintf(`{"host":"127.0.0.1","port":%s,"database":"x","username":"u"}`, silentPort)
	dsRows["pool_flood"] = dsRow{"postgres", silentConfig, `{"minConns":3000,"maxConns":3000}`}
	dsRows["pool_silent"] = dsRow{"postgres", silentConfig, `{"minConns":2,"maxConns":4}`}
	for name, ds := range dsRows {
		snapshottest.Exec(t, pgURL, upsertDatasource, name, dsRecord(name, ds.driver, ds.config, ds.pool, `{}`))
	}
	results.wrote(int64(len(dsRows)))
	waitSettled(t, d, "hostile datasources settled", len(dsRows),
		func(it item) bool {
			return it.Kind == "datasource" && (strings.Contains(it.Key, "file_") || strings.Contains(it.Key, "pool_"))
		},
		func(it item) bool { return it.State != "ready" && it.State != "pending" })
	its, _ = d.items()
	for _, it := range its {
		if strings.Contains(it.Key, "file_") || strings.Contains(it.Key, "pool_") {
			t.Logf("%s: %s %q", it.Key, it.State, it.Reason)
		}
	}
	created := 0
	_ = filepath.WalkDir(outside, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			created++
			t.Errorf("a row created %s", p)
		}
		return nil
	})
	for _, p := range []string{filepath.Join(d.dir, "x.db"), filepath.Join(d.dir, "abs.db"), filepath.Join(allowed, "x.db")} {
		if _, err := os.Stat(p); err == nil {
			created++
			t.Errorf("a row created %s", p)
		}
	}
	after("sqlite rows naming files outside `datasource.sqlite_dir` (absolute, file: URI with _pragma, .., filename, ?_pragma)",
		"files created outside allowed paths", fmt.Sprint(created), "0")
	after("postgres rows with pool min 3,000 and min 2 against a server that never answers",
		"connections opened to the silent server", fmt.Sprint(silentConns.Load()), "one per connect attempt (the 3,000 is refused before any)")
	if fds, _ := procFigures(d.pid()); fds > 200 {
		t.Errorf("%d fds open after the pool rows", fds)
	}

	// Rows above the caps: a 64 MiB body (it cost 466 MiB of RSS; the
	// store now returns only its length), an item
	// with 100,000 references (quadratic: 54 s of CPU) and one with 9,000
	// missing references (670 KB log lines and drift files).
	logFrom := d.log.Len()
	_, rssBefore := procFigures(d.pid())
	bigRefs := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"object":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"m%d"`, i) // short names: 100,000 fit under the 1 MiB body cap
		}
		b.WriteString(`]}`)
		return b.String()
	}
	hugeRows := map[string]struct{ typ, body, reason string }{
		"huge_body":    {"object", `{"fields":{},"blob":"` + strings.Repeat("x", 64<<20) + `"}`, "cap (engine.max_body_bytes)"},
		"huge_refs":    {"hook", bigRefs(100_000), "item has 100000 references, above the 10000 cap (engine.max_refs)"},
		"huge_missing": {"hook", bigRefs(9_000), "and 8995 more"},
	}
	for name, row := range hugeRows {
		snapshottest.Exec(t, pgURL, upsertMetadata, row.typ+":"+name, row.typ, name, row.body)
	}
	results.wrote(int64(len(hugeRows)))
	waitSettled(t, d, "huge rows held", len(hugeRows),
		func(it item) bool { return strings.Contains(it.Key, "huge_") },
		func(it item) bool { return it.State == "held" })
	its, _ = d.items()
	for _, it := range its {
		_, name, _ := strings.Cut(it.Key, "/")
		if row, ok := hugeRows[name]; ok && it.Kind == "engine" {
			t.Logf("%s: %s %q", it.Key, it.State, it.Reason)
			if !strings.Contains(it.Reason, row.reason) {
				t.Errorf("%s held for %q, want %q", it.Key, it.Reason, row.reason)
			}
		}
	}
	code, driftBody, err := d.request("GET", "/v1/drift", nil, nil)
	if err != nil || code != 200 {
		t.Fatalf("GET /v1/drift: %d %v", code, err)
	}
	longest := 0
	for _, line := range strings.Split(d.log.String()[logFrom:], "\n") {
		longest = max(longest, len(line))
	}
	longestReason := 0
	for _, it := range its {
		longestReason = max(longestReason, len(it.Reason))
	}
	after("rows above the caps (a 64 MiB body, 100,000 references, 9,000 missing references)",
		"longest log line; longest reason; drift report, bytes",
		fmt.Sprintf("%d; %d; %d", longest, longestReason, len(driftBody)), "≤ 4,096; ≤ 512; ≤ 64 KiB; RSS + ≤ 128 MiB (the store does not read a body above the cap)")
	if longest > 4096 || longestReason > 512 || len(driftBody) > 64<<10 {
		t.Errorf("huge rows: longest log line %d, longest reason %d, drift report %d bytes", longest, longestReason, len(driftBody))
	}
	// Growth, not a level: a daemon built with -race starts near 115 MiB.
	// Read whole, the 64 MiB body cost over 320 MiB.
	if _, rss := procFigures(d.pid()); rss-rssBefore > 128 {
		t.Errorf("RSS %.0f → %.0f MiB after the 64 MiB row: the store read a body above engine.max_body_bytes", rssBefore, rss)
	}
	snapshottest.Exec(t, pgURL, `DELETE FROM sys_metadata WHERE name LIKE 'huge\_%'`)
	results.wrote(int64(len(hugeRows)))

	// Hostile clients: a page whose name was rebound to 127.0.0.1, a
	// cross-site form post, a flood of drift requests.
	served := 0
	for _, host := range []string{"evil.test", "evil.test:" + portOf(d.addr), "127.0.0.1.evil.test"} {
		for _, c := range []struct {
			method, path string
			hdr          map[string]string
		}{{"GET", "/v1/items", map[string]string{"Host": host}}, {"POST", "/v1/resync", map[string]string{"Host": host, "Content-Type": "application/json"}}} {
			code, _, err := d.request(c.method, c.path, nil, c.hdr)
			if err != nil {
				t.Fatal(err)
			}
			if code < 400 {
				served++
			}
		}
	}
	after("DNS rebinding: requests with Host evil.test (GET /v1/items, POST /v1/resync)", "requests served", fmt.Sprint(served), "0")
	if served != 0 {
		t.Errorf("%d rebound requests served", served)
	}
	served = 0
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		for _, p := range []string{"/v1/resync", "/v1/reconcile", "/v1/drift"} {
			code, _, err := d.request("POST", p, strings.NewReader("x=1"), map[string]string{"Content-Type": ct})
			if err != nil {
				t.Fatal(err)
			}
			if code < 400 {
				served++
			}
		}
	}
	after("cross-site POST (text/plain, form, multipart, none) to /v1/resync, /v1/reconcile, /v1/drift", "requests served", fmt.Sprint(served), "0")
	if served != 0 {
		t.Errorf("%d cross-site posts served", served)
	}

	// Store reads per drift request: one alone, then 20 at once.
	measure := func(n int) int64 {
		before := relay.dataRows.Load()
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, b, err := d.request("GET", "/v1/drift", nil, nil); err != nil || code != 200 {
					t.Errorf("GET /v1/drift: %d %.200s %v", code, b, err)
				}
			}()
		}
		wg.Wait()
		return relay.dataRows.Load() - before
	}
	one := measure(1)
	worst := 0.0
	for range iterations(3, 10) {
		reads := float64(measure(20)) / float64(one)
		worst = max(worst, reads)
	}
	after("20 concurrent GET /v1/drift (3,000-row store), repeated", "store reads (rows read ÷ rows of one drift)", fmt.Sprintf("%.1f (worst round)", worst), "≤ 2")
	if worst > 2.5 {
		t.Errorf("20 concurrent drift requests read the store %.1f times", worst)
	}

	// A non-loopback listen without a token does not start.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--store.url", withApp(pgURL, "chaos-hostile-public"), "--status.listen", "0.0.0.0:0", "--drift.dir", filepath.Join(r.dir, "public-drift"))
	cmd.Env = proctest.CleanEnv()
	out, err := cmd.CombinedOutput() // a daemon that starts runs until the context kills it
	started := 0
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "status.token_env") {
		started = 1
		t.Errorf("run on 0.0.0.0 without a token: %v\n%s", err, out)
	}
	after("`reconciler run --status.listen 0.0.0.0:0` without a token", "daemons started", fmt.Sprint(started), "0")
	if s, err := d.status(); err != nil || !s.StoreUp {
		t.Errorf("status after the attacks: %+v %v", s, err)
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
