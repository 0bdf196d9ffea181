package chaos

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// Bad input at the edges is also fuzzed where it is parsed, by the
// packages that own the parsers; this suite adds what needs a live
// daemon:
//
//   - internal/daemon/statusapi FuzzHandler: the HTTP API handler, any method, path and query
//   - internal/config FuzzParse: the config loader
//   - drivers/engine FuzzDecode, drivers/connector FuzzParseSpec,
//     drivers/datasource FuzzParseConfig: the row decoders
//   - drivers/notify FuzzMerge: coalescing of change sets
//   - chaos FuzzLiveItemsQuery (below): /v1/items query strings against a
//     running daemon process.

// edgeDaemon starts a daemon on an SQLite store with a few entries.
func edgeDaemon(t testing.TB, name string) *daemon {
	url := snapshottest.NewSQLiteURL(t)
	(loadSpace{objects: 3, credentials: 1, others: 0}).seedTB(t, url)
	r := newRig(t, name)
	d := r.newDaemon(name, url)
	d.start()
	return d
}

// Malformed requests against a live daemon get a 4xx, never a 5xx or a
// crash; the daemon serves normally afterwards.
func TestChaosEdges(t *testing.T) {
	t.Parallel()
	d := edgeDaemon(t, "edges")
	long := strings.Repeat("k", 60<<10)
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
	}{
		{"GET", "/v1/items?kind=%zz", nil},
		{"GET", "/v1/items?kind=bogus", nil},
		{"GET", "/v1/items?state=ready'%3B%20DROP%20TABLE%20sys_metadata%3B--", nil},
		{"GET", "/v1/items?kind=engine&kind=credential&nope=1", nil},
		{"GET", "/v1/items?kind=" + long, nil},
		{"GET", "/v1/items?state=%00%01%02", nil},
		{"GET", "/v1/items?kind=%E2%80%AEenigne", nil},
		{"GET", "/v1/items;kind=engine", nil},
		{"PUT", "/v1/items", nil},
		{"DELETE", "/v1/status", nil},
		{"GET", "/v1/reconcile", nil},
		{"GET", "/v1/resync", nil},
		{"PATCH", "/v1/drift", nil},
		{"GET", "/v1/../../etc/passwd", nil},
		{"GET", "/v2/items", nil},
		{"GET", "/v1/status", map[string]string{"X-Big": strings.Repeat("h", 80<<10)}},
		{"POST", "/v1/reconcile", map[string]string{"Content-Type": "application/json", "Content-Length": "5"}},
	} {
		var body *strings.Reader
		if c.method == "POST" {
			body = strings.NewReader("{bad}")
		} else {
			body = strings.NewReader("")
		}
		code, b, err := d.request(c.method, c.path, body, c.hdr)
		results.fault("malformed HTTP request")
		if c.method == "POST" && c.path == "/v1/reconcile" {
			if err != nil || code != http.StatusAccepted { // the body is ignored
				t.Errorf("%s %s: %d %s %v", c.method, c.path, code, b, err)
			}
			continue
		}
		// A 4xx answered before the server closes the connection counts even
		// when reading its body then fails (a 431 to an oversized header is
		// sent while the client may still be writing: a reset may follow).
		if code < 400 || code >= 500 {
			t.Errorf("%s %.80s: %d %.200s %v", c.method, c.path, code, b, err)
		}
	}
	// Garbage on the wire.
	for _, raw := range []string{"GARBAGE\r\n\r\n", "GET /v1/items HTTP/9.9\r\n\r\n", "GET /v1/items?\x00 HTTP/1.1\r\nHost: x\r\n\r\n", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"} {
		results.fault("malformed HTTP request")
		conn, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second)) // an incomplete request may get no answer at all
		_, _ = conn.Write([]byte(raw))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		// 505 is HTTP's own answer to an unknown version, not a server fault.
		if line != "" && !strings.Contains(line, " 4") && !strings.Contains(line, " 505 ") {
			t.Errorf("%q answered %q", raw, line)
		}
	}
	if code, _, err := d.request("GET", "/healthz", nil, nil); err != nil || code != 200 {
		t.Fatalf("daemon unhealthy after malformed requests: %d %v", code, err)
	}
	if _, err := d.items(); err != nil {
		t.Fatal(err)
	}
}

// FuzzLiveItemsQuery sends arbitrary query strings to GET /v1/items of a
// running daemon: every answer is 200 with a JSON array or a 4xx with a
// JSON error, and the daemon keeps running.
func FuzzLiveItemsQuery(f *testing.F) {
	for _, s := range []string{"", "kind=engine", "state=held", "kind=engine&state=ready", "kind=%zz", "x=1", "kind=credential&kind=engine", ";;", "kind=" + url.QueryEscape("engine\x00")} {
		f.Add(s)
	}
	d := edgeDaemon(f, "fuzz-items")
	f.Fuzz(func(t *testing.T, q string) {
		u := &url.URL{Path: "/v1/items", RawQuery: q}
		req := u.RequestURI()
		if strings.ContainsAny(req, " \r\n\t\x00") || len(req) > 32<<10 {
			t.Skip("not sendable as a request line")
		}
		code, b, err := d.request("GET", req, nil, nil)
		if err != nil {
			if !d.running() {
				t.Fatalf("daemon died on query %q: %v", q, err)
			}
			t.Skip("not sendable: " + err.Error())
		}
		switch {
		case code == 200:
			var its []item
			if err := json.Unmarshal(b, &its); err != nil {
				t.Fatalf("query %q: 200 with %s", q, b)
			}
		case code >= 400 && code < 500:
			var e struct{ Error string }
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				t.Fatalf("query %q: %d without a JSON error: %s", q, code, b)
			}
		default:
			t.Fatalf("query %q: %d %s", q, code, b)
		}
	})
}
