package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// Upstream answers.
const (
	answerOK = iota
	answer401
	answer503
	answerHang
)

// flappingUpstream answers as its mode says; refusals echo the request's
// Authorization header, so that a careless error path would leak the
// canary.
func flappingUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var mode atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case answer401:
			http.Error(w, "refused: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
		case answer503:
			http.Error(w, "unavailable for "+r.Header.Get("Authorization"), http.StatusServiceUnavailable)
		case answerHang:
			select {
			case <-r.Context().Done():
			case <-release:
			}
		default:
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv, &mode
}

// Upstream faults: connector upstreams flap between 200, 401, 503 and
// hanging while their credential rotates (every rotation re-probes);
// once upstream is healthy and the credential rotates once more, every
// connector is ready. A datasource's PostgreSQL goes away (the entry
// degrades, the old pool keeps serving) and returns (ready again).
func TestChaosUpstream(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	dsc := testdb.NewCluster(t)
	if err := testdb.Exec(context.Background(), dsc.URL("postgres"), "CREATE DATABASE dsdb"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "upstream")
	up, mode := flappingUpstream(t)
	const conns = 6
	for i := 0; i < 2; i++ {
		snapshottest.Exec(t, url, upsertCredential, fmt.Sprintf("up%d", i), secretValue(i))
	}
	for i := 0; i < conns; i++ {
		snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("connector:u%d", i), "connector", fmt.Sprintf("u%d", i),
			connectorBody(up.URL, fmt.Sprintf("up%d", i%2), "300ms"))
	}
	dsRow := func(lifetime string) {
		snapshottest.Exec(t, url, upsertDatasource, "away", dsRecord("away", "postgres", fmt.Sprintf(`{"url":%q}`, withApp(dsc.URL("dsdb"), "chaos-away")),
			fmt.Sprintf(`{"maxConns":1,"maxConnLifetime":%q}`, lifetime), `{"credentialsRef":"up0"}`))
	}
	dsRow("1h")
	ds := []*daemon{
		r.newDaemon("up-a", withApp(url, "chaos-up-a")),
		r.newDaemon("up-b", withApp(url, "chaos-up-b"), set("hint.listen", false), set("apply.concurrency", 2)),
	}
	for _, d := range ds {
		d.start()
	}
	r.converge(url, ds...)
	r.searchStoreRows(url)

	rnd := rand.New(rand.NewPCG(17, 19))
	names := map[int32]string{answerOK: "200", answer401: "401", answer503: "503", answerHang: "hang"}
	answered := map[string]int{}
	defer func() { t.Logf("upstream answer modes injected: %v", answered) }()
	for round := 0; round < iterations(2, 8); round++ {
		for i := 0; i < iterations(6, 12); i++ {
			m := int32(rnd.IntN(4))
			mode.Store(m)
			results.fault("upstream flapping (200/401/503/hang)")
			answered[names[m]]++
			snapshottest.Exec(t, url, upsertCredential, fmt.Sprintf("up%d", rnd.IntN(2)), secretValue(rnd.IntN(1000)))
			results.wrote(1)
			time.Sleep(time.Duration(100+rnd.IntN(300)) * time.Millisecond) // the flap period: a pause, not a wait
		}
		// Mid-flap, entries are in whatever state their last probe
		// earned, but never pending and never without a reason.
		r.wantState = func(item) string { return "" }
		r.converge(url, ds...)
		// Upstream heals; the operator rotates the credentials.
		mode.Store(answerOK)
		for i := 0; i < 2; i++ {
			snapshottest.Exec(t, url, upsertCredential, fmt.Sprintf("up%d", i), secretValue(2000+round))
		}
		results.wrote(2)
		r.wantState = func(item) string { return "ready" }
		results.converged("upstream flapping (200/401/503/hang)", r.converge(url, ds...))
	}

	// The datasource's server goes away: a rebuild fails (degraded, the
	// old pool keeps serving) and succeeds by itself once it is back.
	for i := 0; i < iterations(1, 3); i++ {
		dsc.Stop()
		dsRow(fmt.Sprintf("%dm", 61+i))
		results.wrote(1)
		r.wantState = func(it item) string {
			if it.Kind == "datasource" {
				return "degraded"
			}
			return "ready"
		}
		r.converge(url, ds...)
		dsc.Start()
		r.wantState = func(item) string { return "ready" }
		r.faultConverged("datasource server away and back", url, ds...)
	}
}
