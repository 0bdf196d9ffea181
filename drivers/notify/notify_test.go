package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/drivers/notify"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const canary = "canary-hmac-2c7a90"

func change(kind registry.Kind, key string, a reconcile.Action, rev int64, st registry.State) reconcile.Change {
	return reconcile.Change{Kind: kind, Key: key, Action: a, Revision: rev, State: st}
}

// start runs r until the test ends and waits for it.
func start(t *testing.T, run func(context.Context) error) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return cancel
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

type delivery struct {
	body     []byte
	signedOK bool
	answer   chan int
}

func TestWebhookRetriesAndCoalesces(t *testing.T) {
	got := make(chan delivery)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d := delivery{body: b, signedOK: r.Header.Get(notify.SignatureHeader) == notify.Sign(canary, r.Header.Get(notify.TimestampHeader), b) &&
			r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/json", answer: make(chan int)}
		select {
		case got <- d:
		case <-r.Context().Done():
			return
		}
		select {
		case code := <-d.answer:
			w.WriteHeader(code)
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	logs := proctest.NewBuffer()
	attempts := make(chan error, 16)
	w := notify.NewWebhook(notify.WebhookOptions{
		URL: srv.URL, Secret: canary, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnAttempt: func(_ reconcile.ChangeSet, err error) { attempts <- err },
	})
	start(t, w.Run)

	w.Notify(reconcile.ChangeSet{ReplicaID: "r1", Cursor: "c1", Changes: []reconcile.Change{
		change(registry.KindConnector, "crm", reconcile.ActionCreate, 1, registry.StateHeld)}})
	d := recv(t, got, "first attempt")
	if !d.signedOK {
		t.Fatalf("bad signature or request on %s", d.body)
	}
	assertJSON(t, d.body, `{"replica":"r1","cursor":"c1","changes":[{"kind":"connector","key":"crm","action":"create","revision":1,"state":"held"}]}`)

	// While the first attempt hangs, more passes happen; Notify never blocks.
	for i := range 1000 {
		w.Notify(reconcile.ChangeSet{ReplicaID: "r1", Cursor: "c2", Changes: []reconcile.Change{
			change(registry.KindConnector, "crm", reconcile.ActionRebuild, int64(2+i), registry.StateReady)}})
	}
	w.Notify(reconcile.ChangeSet{ReplicaID: "r1", Cursor: "c3", Changes: []reconcile.Change{
		change(registry.KindEngine, "view/all", reconcile.ActionEvict, 9, registry.StatePending)}})
	d.answer <- http.StatusInternalServerError
	if err := recv(t, attempts, "first outcome"); err == nil || err.Error() != "webhook answered 500" {
		t.Fatalf("first outcome = %v", err)
	}

	want := `{"replica":"r1","cursor":"c3","changes":[` +
		`{"kind":"connector","key":"crm","action":"rebuild","revision":1001,"state":"ready"},` +
		`{"kind":"engine","key":"view/all","action":"evict","revision":9,"state":"pending"}]}`
	d = recv(t, got, "second attempt")
	assertJSON(t, d.body, want)
	d.answer <- http.StatusServiceUnavailable
	recv(t, attempts, "second outcome")
	d = recv(t, got, "third attempt")
	if !d.signedOK {
		t.Fatal("bad signature on retry")
	}
	assertJSON(t, d.body, want)
	d.answer <- http.StatusNoContent
	if err := recv(t, attempts, "third outcome"); err != nil {
		t.Fatalf("third outcome = %v", err)
	}

	// An empty change set still carries an array.
	w.Notify(reconcile.ChangeSet{ReplicaID: "r1", Cursor: "c4"})
	d = recv(t, got, "empty set")
	assertJSON(t, d.body, `{"replica":"r1","cursor":"c4","changes":[]}`)
	d.answer <- http.StatusOK
	recv(t, attempts, "empty outcome")

	if strings.Contains(logs.String(), canary) {
		t.Fatalf("logs leak the secret:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "notify failed, will retry") {
		t.Fatalf("no retry logged:\n%s", logs)
	}
}

func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	if bytes.Contains(got, []byte(canary)) {
		t.Fatalf("payload leaks the secret: %s", got)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("payload %s: %v", got, err)
	}
	_ = json.Unmarshal([]byte(want), &w)
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("payload\n got %s\nwant %s", gb, wb)
	}
}

func TestExecFailsThenDelivers(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "changes.jsonl")
	attempts := make(chan error, 16)
	e := notify.NewExec(notify.ExecOptions{
		// Fails the first run, appends stdin to the file afterwards.
		Command:    []string{"sh", "-c", `if [ -e "$1.ok" ]; then cat >> "$1"; echo >> "$1"; else : > "$1.ok"; echo first run fails >&2; exit 3; fi`, "sh", out},
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Timeout: 10 * time.Second,
		OnAttempt: func(_ reconcile.ChangeSet, err error) { attempts <- err },
	})
	start(t, e.Run)
	e.Notify(reconcile.ChangeSet{ReplicaID: "r2", Cursor: "seq:7", Changes: []reconcile.Change{
		change(registry.KindDatasource, "crm", reconcile.ActionEvict, 4, registry.StatePending)}})
	if err := recv(t, attempts, "first run"); err == nil || !strings.Contains(err.Error(), "exit status 3: first run fails") {
		t.Fatalf("first run = %v", err)
	}
	if err := recv(t, attempts, "second run"); err != nil {
		t.Fatalf("second run = %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, bytes.TrimSpace(b), `{"replica":"r2","cursor":"seq:7","changes":[{"kind":"datasource","key":"crm","action":"evict","revision":4,"state":"pending"}]}`)
}

func TestExecTimeout(t *testing.T) {
	attempts := make(chan error, 16)
	e := notify.NewExec(notify.ExecOptions{
		Command: []string{"sh", "-c", "exec sleep 30"}, Timeout: 100 * time.Millisecond,
		MinBackoff: time.Hour, OnAttempt: func(_ reconcile.ChangeSet, err error) { attempts <- err },
	})
	cancel := start(t, e.Run)
	e.Notify(reconcile.ChangeSet{ReplicaID: "r3"})
	if err := recv(t, attempts, "timed-out run"); err == nil || err.Error() != "run sh: timed out after 100ms" {
		t.Fatalf("run = %v", err)
	}
	cancel()
}

func TestExecNoCommand(t *testing.T) {
	if err := notify.NewExec(notify.ExecOptions{}).Run(context.Background()); !errors.Is(err, notify.ErrNoCommand) {
		t.Fatalf("Run = %v", err)
	}
}
