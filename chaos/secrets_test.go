package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// receiver is an httptest webhook target keeping every request it got.
type receiver struct {
	mu  sync.Mutex
	got bytes.Buffer
	n   int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.n++
	fmt.Fprintf(&rc.got, "%s %s %v\n%s\n", r.Method, r.URL, r.Header, b)
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) String() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got.String()
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n
}

// Secrets: the canary is every credential's value — sent upstream as a
// bearer token, an API key and basic auth, echoed back by refusing
// upstreams, used as a datasource password the server rejects — and it
// is searched for in every log line (at debug), every HTTP response and
// header, drift files and rows, heartbeat rows, webhook and exec
// payloads, and the CLI's output: zero hits. The API refuses requests
// without the token.
func TestChaosSecrets(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	r := newRig(t, "secrets")
	up, mode := flappingUpstream(t)
	mode.Store(answer401)
	hook := &receiver{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	r.search(func() (string, string) { return "webhook payloads", hook.String() })
	execOut := filepath.Join(r.dir, "exec-payloads.json")
	r.search(func() (string, string) { b, _ := os.ReadFile(execOut); return "exec payloads", string(b) })

	snapshottest.Exec(t, url, upsertCredential, "bearer", canary)
	snapshottest.Exec(t, url, upsertCredential, "basic", "user:"+canary)
	snapshottest.Exec(t, url, upsertCredential, "apikey", canary+"-key")
	auth := func(typ, ref string) string {
		b, _ := json.Marshal(map[string]any{
			"provider":       "rest",
			"providerConfig": map[string]any{"baseUrl": up.URL, "probe": map[string]string{"method": "GET", "path": "/health?token=" + ref}, "timeout": "1s"},
			"auth":           map[string]string{"type": typ, "credentialRef": ref},
		})
		return string(b)
	}
	snapshottest.Exec(t, url, upsertMetadata, "connector:s1", "connector", "s1", auth("bearer", "bearer"))
	snapshottest.Exec(t, url, upsertMetadata, "connector:s2", "connector", "s2", auth("basic", "basic"))
	snapshottest.Exec(t, url, upsertMetadata, "connector:s3", "connector", "s3", auth("api-key", "apikey"))
	// A datasource whose server refuses the (canary) password, and one
	// whose server is not there.
	snapshottest.Exec(t, url, upsertDatasource, "ds_refused", dsRecord("ds_refused", "postgres",
		fmt.Sprintf(`{"url":%q}`, withDatabaseUser(url, "no_such_role_chaos")), `{}`, `{"credentialsRef":"bearer"}`))
	snapshottest.Exec(t, url, upsertDatasource, "ds_gone", dsRecord("ds_gone", "postgres",
		`{"host":"127.0.0.1","port":1,"database":"x","user":"u"}`, `{}`, `{"connector":"s1"}`))

	d := r.newDaemon("secrets", withApp(url, "chaos-secrets"),
		set("status.token_env", "CHAOS_TOKEN"),
		set("notify.webhook.url", hookSrv.URL+"/hook"),
		set("notify.webhook.secret_env", "CHAOS_HOOK_SECRET"),
		set("notify.exec.command", []string{"sh", "-c", `cat >> "$0"; echo >> "$0"`, execOut}),
		set("drift.schedule", "@every 1s"))
	d.env = []string{"CHAOS_TOKEN=tok-" + randomHex(8), "CHAOS_HOOK_SECRET=hmac-" + randomHex(8)}
	d.token = strings.TrimPrefix(d.env[0], "CHAOS_TOKEN=")
	d.start()
	r.searchStoreRows(url)
	r.wantState = func(item) string { return "" }
	r.converge(url, d)

	// Flap the upstream and rotate the credentials so that every path
	// runs: refused, unavailable, timed out, ready.
	for i, m := range []int32{answer503, answerHang, answerOK, answer401} {
		mode.Store(m)
		snapshottest.Exec(t, url, upsertCredential, "bearer", canary)
		snapshottest.Exec(t, url, upsertCredential, "basic", fmt.Sprintf("user%d:%s", i, canary))
		snapshottest.Exec(t, url, upsertCredential, "apikey", fmt.Sprintf("%s-key%d", canary, i))
		results.wrote(3)
		r.faultConverged("canary credential rotated", url, d)
	}
	d.signal(syscall.SIGUSR2)
	eventually(t, "webhook and exec told", func() bool {
		_, err := os.Stat(execOut)
		return hook.count() > 0 && err == nil
	})
	for _, p := range []string{"/v1/status", "/v1/items", "/v1/items?state=held", "/v1/drift", "/metrics", "/healthz", "/readyz"} {
		if code, b, err := d.request("GET", p, nil, nil); err != nil || code != 200 {
			t.Errorf("GET %s: %d %s %v", p, code, b, err)
		}
	}
	if code, b, err := d.request("POST", "/v1/drift", nil, jsonType); err != nil || code != 200 {
		t.Errorf("POST /v1/drift: %d %s %v", code, b, err)
	}

	// The CLI, asking the daemon and the store.
	for _, args := range [][]string{{"status"}, {"items"}, {"items", "--json"}, {"drift", "--json"}, {"drift"}} {
		out := cli(t, d.env, append(args, "--addr", d.addr, "--status.token_env", "CHAOS_TOKEN")...)
		r.seen("reconciler "+strings.Join(args, " "), []byte(out))
	}
	out := cli(t, nil, "fleet", "--store.url", url, "--json")
	r.seen("reconciler fleet", []byte(out))

	// No token, a wrong token: refused everywhere but the probes.
	token := d.token
	for _, tok := range []string{"", "wrong-" + token, strings.ToUpper(token)} {
		d.token = tok
		for _, ep := range []struct{ method, path string }{
			{"GET", "/v1/status"}, {"GET", "/v1/items"}, {"GET", "/v1/drift"}, {"GET", "/metrics"},
			{"POST", "/v1/reconcile"}, {"POST", "/v1/resync"}, {"POST", "/v1/drift"},
		} {
			code, b, err := d.request(ep.method, ep.path, nil, nil)
			if err != nil || code != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d %s %v", ep.method, ep.path, tok, code, b, err)
			}
			results.fault("request without the right token")
		}
		if code, _, err := d.request("GET", "/healthz", nil, nil); err != nil || code != 200 {
			t.Errorf("/healthz without token: %d %v", code, err)
		}
	}
	d.token = token
	if code := d.stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	// The search is not vacuous: the canary is in the credential rows,
	// and the daemon logged at debug.
	if !strings.Contains(allRows(url, "sys_connector_credential"), canary) {
		t.Error("the canary is not even in the credential rows: the search proves nothing")
	}
	if !strings.Contains(d.log.String(), `"level":"DEBUG"`) {
		t.Error("no debug lines: the log search did not run at debug")
	}
}

// withDatabaseUser returns url with its user replaced.
func withDatabaseUser(raw, user string) string {
	i := strings.Index(raw, "://")
	j := strings.Index(raw, "@")
	if i < 0 || j < 0 {
		return raw
	}
	return raw[:i+3] + user + raw[j:]
}

// cli runs the binary to completion and returns its combined output.
func cli(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(proctest.CleanEnv(), env...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !(args[0] == "drift" && errors.As(err, &ee) && ee.ExitCode() == 3) { // 3: drift found
		t.Errorf("reconciler %v: %v\n%s", args, err, out)
	}
	return string(out)
}
