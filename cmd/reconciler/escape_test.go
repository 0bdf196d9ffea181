package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/daemon/statusapi"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// hostile strings a row can carry: terminal escapes (set the title, clear
// the screen, colours), a newline forging a table row, a tab forging a
// column, a bidi override, invalid UTF-8.
const (
	hostileKey    = "crm\x1b]0;pwned\x07\nconnector  forged  ready  1"
	hostileReason = "\x1b[2J\x1b[31mrefused\tupstream \u202eevil\xff"
)

// rawTerminal reports what must never reach a terminal from a row.
func rawTerminal(s string) string {
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\xff", "\t", "forged  ready\n"} {
		if strings.Contains(s, bad) {
			return bad
		}
	}
	return ""
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain/key":           "plain/key",
		"ünïcödé ✓":           "ünïcödé ✓",
		hostileKey:            `crm\x1b]0;pwned\x07\nconnector  forged  ready  1`,
		hostileReason:         `\x1b[2J\x1b[31mrefused\tupstream \u202eevil\xff`,
		"a\u200bb\u2028c\x7f": `a\u200bb\u2028c\x7f`,
		"\u0085c1":            `\u0085c1`,
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// A forged row is printed escaped by every table command; --json keeps the
// value as JSON.
func TestTablesEscapeRows(t *testing.T) {
	t.Parallel()
	now := time.Now()
	mux := http.NewServeMux()
	serveJSON := func(path string, v any) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	serveJSON("/v1/items", []registry.Entry{{Kind: registry.KindConnector, Key: hostileKey, State: registry.StateHeld, Revision: 1, Reason: hostileReason, Since: now}})
	serveJSON("/v1/status", statusapi.StatusBody{Status: reconcile.Status{ReplicaID: "r1\x1b[8m", LastError: hostileReason}, Version: "v\x1b[0m", Store: "sqlite://x\n"})
	serveJSON("/v1/drift", reconcile.DriftReport{ReplicaID: "r1\x1b[8m", At: now, Cursor: "seq:1\r",
		NotReady: []reconcile.DriftItem{{Kind: registry.KindConnector, Key: hostileKey, State: registry.StateHeld, Reason: hostileReason}}})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	for _, args := range [][]string{{"items"}, {"status"}, {"drift"}} {
		r := reconciler(t, dir, nil, append(args, "--addr", addr)...)
		if r.code != 0 && !(args[0] == "drift" && r.code == 3) {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if bad := rawTerminal(r.stdout); bad != "" {
			t.Errorf("%v prints %q raw:\n%s", args, bad, r.stdout)
		}
		if args[0] != "status" && !strings.Contains(r.stdout, `crm\x1b]0;pwned\x07\nconnector  forged  ready  1`) {
			t.Errorf("%v: the key is not shown escaped:\n%s", args, r.stdout)
		}
	}
	r := reconciler(t, dir, nil, "items", "--json", "--addr", addr)
	var entries []registry.Entry
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 1 || entries[0].Key != hostileKey {
		t.Fatalf("--json: %v %q", err, r.stdout)
	}
}

func TestFleetEscapesRows(t *testing.T) {
	now := time.Now()
	v := buildFleet(snapshot.Watermark{Seq: 1, At: now}, []snapshot.Heartbeat{{
		ReplicaID: "r1\x1b]0;x\x07", Host: "h\nforged  ready\n", Version: "\u202ev", HeartbeatAt: now, LastError: hostileReason,
	}}, time.Second, now)
	var out bytes.Buffer
	printFleet(&cli{stdout: &out}, v)
	if bad := rawTerminal(out.String()); bad != "" {
		t.Fatalf("fleet prints %q raw:\n%s", bad, out.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 4 {
		t.Fatalf("%d lines, want head, blank, header, one row:\n%s", n, out.String())
	}
}
