package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/notify"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// The exec command does not inherit the daemon's environment, where
// tokens and secrets live.
func TestExecMinimalEnvironment(t *testing.T) {
	t.Setenv("RECONCILER_STATUS_TOKEN", canary)
	t.Setenv("WEBHOOK_SECRET", canary)
	t.Setenv("RECONCILER_STORE_URL", "postgres://u:"+canary+"@h/db")
	t.Setenv("TZ", "UTC")
	out := filepath.Join(t.TempDir(), "env")
	attempts := make(chan error, 4)
	e := notify.NewExec(notify.ExecOptions{
		Command:   []string{"sh", "-c", `env > "$1"`, "sh", out},
		OnAttempt: func(_ reconcile.ChangeSet, err error) { attempts <- err },
	})
	start(t, e.Run)
	e.Notify(reconcile.ChangeSet{ReplicaID: "r"})
	if err := recv(t, attempts, "run"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), canary) {
		t.Fatalf("the command saw a secret of the daemon's environment:\n%s", b)
	}
	shell := []string{"PWD", "OLDPWD", "SHLVL", "_"} // set by sh itself
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, _, _ := strings.Cut(line, "=")
		keys = append(keys, k)
		if !slices.Contains(notify.ExecEnvKeys, k) && !slices.Contains(shell, k) {
			t.Errorf("unexpected variable %s", k)
		}
	}
	if !slices.Contains(keys, "PATH") || !slices.Contains(keys, "TZ") {
		t.Errorf("PATH or TZ missing: %q", keys)
	}
}

// The signature covers the timestamp: a captured request replayed with a
// fresh timestamp does not verify, and the body alone is not what is
// signed.
func TestWebhookSignsTimestamp(t *testing.T) {
	type req struct {
		ts, sig string
		body    []byte
	}
	got := make(chan req, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- req{r.Header.Get(notify.TimestampHeader), r.Header.Get(notify.SignatureHeader), b}
	}))
	defer srv.Close()
	now := time.Unix(1_790_000_000, 0)
	w := notify.NewWebhook(notify.WebhookOptions{URL: srv.URL, Secret: canary, Now: func() time.Time { return now }})
	start(t, w.Run)
	w.Notify(reconcile.ChangeSet{ReplicaID: "r1", Cursor: "c1"})
	r := recv(t, got, "delivery")
	if r.ts != "1790000000" {
		t.Fatalf("timestamp %q", r.ts)
	}
	if r.sig != notify.Sign(canary, r.ts, r.body) {
		t.Fatalf("signature %q does not verify", r.sig)
	}
	if r.sig == notify.Sign(canary, "1790000300", r.body) {
		t.Fatal("the signature does not depend on the timestamp: replayable")
	}
	if want := "sha256=" + hmacHex(canary, "1790000000."+string(r.body)); r.sig != want {
		t.Fatalf("signature %q, want HMAC of \"<ts>.<body>\" %q", r.sig, want)
	}
}

// A webhook without a secret says so at start; a URL's query token never
// reaches the logs, not even through a transport error quoting the URL.
func TestWebhookUnsignedWarnsAndRedacts(t *testing.T) {
	logs := proctest.NewBuffer()
	attempts := make(chan error, 4)
	w := notify.NewWebhook(notify.WebhookOptions{
		URL:        "http://127.0.0.1:1/hook?token=" + canary + "&channel=ops",
		MinBackoff: time.Hour,
		Logger:     slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnAttempt:  func(_ reconcile.ChangeSet, err error) { attempts <- err },
	})
	start(t, w.Run)
	w.Notify(reconcile.ChangeSet{ReplicaID: "r"})
	err := recv(t, attempts, "failed attempt")
	if err == nil || strings.Contains(err.Error(), canary) || !strings.Contains(err.Error(), "token=xxxxx") {
		t.Fatalf("attempt error %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "notify failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no failure logged:\n%s", logs)
		}
		time.Sleep(time.Millisecond)
	}
	if strings.Contains(logs.String(), canary) {
		t.Fatalf("logs leak the URL's token:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "webhook requests are not signed") || !strings.Contains(logs.String(), `"level":"WARN"`) {
		t.Fatalf("no warning about unsigned requests:\n%s", logs)
	}
}

func hmacHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// A webhook answering a redirect is not followed: the body and its
// signature never reach the other host, and the attempt fails (retried).
func TestWebhookRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL+"/webhook-redirected", http.StatusTemporaryRedirect))
	defer srv.Close()
	attempts := make(chan error, 4)
	w := notify.NewWebhook(notify.WebhookOptions{URL: srv.URL, Secret: canary, MinBackoff: time.Hour,
		OnAttempt: func(_ reconcile.ChangeSet, err error) { attempts <- err }})
	start(t, w.Run)
	w.Notify(reconcile.ChangeSet{ReplicaID: "r"})
	if err := recv(t, attempts, "attempt"); err == nil || !strings.Contains(err.Error(), "307") {
		t.Fatalf("attempt: %v, want the 307 as a failure", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests", n)
	}
}
