package chaos

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// vmHWM is a process's peak resident set (VmHWM), in MiB: what a cgroup
// memory limit meets (ulimit -v counts address space, which Go reserves
// far beyond what it uses).
func vmHWM(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// shippedLimitMiB is the sidecar's memory limit in the shipped manifests
// (deploy/kubernetes/base).
const shippedLimitMiB = 256

// TestChaosMemory measures the peak RSS (VmHWM) of a daemon against rows
// that each pass the caps but together are large: 200 objects of about
// 1 MB committed at once, applied, resynced and reported on (drift), a
// cold start of another daemon on them, and 30 openapi connectors whose
// specs are just under connector.max_spec_bytes (8 MiB).
func TestChaosMemory(t *testing.T) {
	t.Parallel()
	pgURL := snapshottest.NewPostgresURL(t)
	r := newRig(t, "memory")
	// As shipped: the collector keeps the heap under the container's limit
	// (deploy/kubernetes/base sets GOMEMLIMIT from limits.memory).
	shipped := []string{fmt.Sprintf("GOMEMLIMIT=%dMiB", shippedLimitMiB)}
	// The shipped binary, not the suite's: under -race the race runtime's
	// shadow memory would be measured (a -race daemon peaks near 700 MiB
	// here), and the race detector has nothing to find in a memory bound.
	plain := binary
	if proctest.Race() {
		b, cleanup, err := proctest.BuildPlainReconciler("../cmd/reconciler", "chaos")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cleanup)
		plain = b
	}
	d := r.newDaemon("memory", withApp(pgURL, "chaos-memory"), set("drift.schedule", ""))
	d.env, d.bin = shipped, plain
	d.start()
	r.converge(pgURL, d)
	hwm := func(dd *daemon) float64 { return vmHWM(t, dd.pid()) }
	after := func(attack, got string, dd *daemon) {
		fds, rss := procFigures(dd.pid())
		hostileResults.add(hostileRow{attack: attack, measure: "peak RSS (VmHWM), MiB", got: got,
			bound: fmt.Sprintf("< %d (the shipped sidecar limit)", shippedLimitMiB), fds: fds, rssMiB: rss})
		t.Logf("%s: VmHWM %s MiB; fds %d, RSS %.0f MiB", attack, got, fds, rss)
	}
	base := hwm(d)

	const rows, size = 200, 1_000_000
	snapshottest.Exec(t, pgURL, `INSERT INTO sys_metadata (id, type, name, metadata)
SELECT 'object:big' || i, 'object', 'big' || i, '{"fields":{"name":{"type":"text"}},"description":"' || repeat('x', $1::int) || '"}'
FROM generate_series(1, $2::int) i`, size, rows)
	results.wrote(rows)
	waitSettled(t, d, "the large objects applied", rows,
		func(it item) bool { return it.Kind == "engine" && strings.HasPrefix(it.Key, "object/big") },
		func(it item) bool { return it.State == "ready" })
	delta := hwm(d)
	if code, _, err := d.request("POST", "/v1/resync", nil, jsonType); err != nil || code >= 300 {
		t.Fatalf("POST /v1/resync: %d %v", code, err)
	}
	if code, _, err := d.request("GET", "/v1/drift", nil, nil); err != nil || code != 200 {
		t.Fatalf("GET /v1/drift: %d %v", code, err)
	}
	if code, _, err := d.request("GET", "/", nil, nil); err != nil || code >= 300 {
		t.Fatalf("GET /: %d %v", code, err)
	}
	full := hwm(d)
	cold := r.newDaemon("memory-cold", withApp(pgURL, "chaos-memory-cold"), set("drift.schedule", ""))
	cold.env, cold.bin = shipped, plain
	cold.start()
	waitSettled(t, cold, "the cold start applied the large objects", rows,
		func(it item) bool { return it.Kind == "engine" && strings.HasPrefix(it.Key, "object/big") },
		func(it item) bool { return it.State == "ready" })
	coldPeak := hwm(cold)
	cold.stop()
	after(fmt.Sprintf("%d objects of %d bytes (each under engine.max_body_bytes) in one commit; then a resync, GET /v1/drift and the page; a cold start beside", rows, size),
		fmt.Sprintf("%.0f → %.0f (delta) → %.0f (resync, drift, page); cold start %.0f", base, delta, full, coldPeak), d)

	d.stop()

	// 30 openapi connectors with specs just under the 8 MiB cap, on a
	// daemon of their own (VmHWM is a peak since start).
	snapshottest.Exec(t, pgURL, `DELETE FROM sys_metadata WHERE id LIKE 'object:big%'`)
	results.wrote(rows)
	d = r.newDaemon("memory-specs", withApp(pgURL, "chaos-memory-specs"), set("drift.schedule", ""))
	d.env, d.bin = shipped, plain
	d.start()
	spec := `{"openapi":"3.0.3","info":{"title":"x"},"paths":{},"x-pad":"` + strings.Repeat("y", 8<<20-200) + `"}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(spec)) }))
	t.Cleanup(up.Close)
	const specs = 30
	for i := range specs {
		snapshottest.Exec(t, pgURL, upsertMetadata, fmt.Sprintf("connector:spec%d", i), "connector", fmt.Sprintf("spec%d", i),
			fmt.Sprintf(`{"provider":"openapi","providerConfig":{"baseUrl":%q,"specUrl":"/openapi.json"},"auth":{"type":"none"},"enabled":true}`, up.URL))
	}
	results.wrote(specs)
	waitSettled(t, d, "the openapi connectors ready", specs,
		func(it item) bool { return it.Kind == "connector" && strings.HasPrefix(it.Key, "spec") },
		func(it item) bool { return it.State == "ready" })
	specPeak := hwm(d)
	after(fmt.Sprintf("%d openapi connectors whose spec is 8 MiB − 200 B (under connector.max_spec_bytes)", specs), fmt.Sprintf("%.0f", specPeak), d)
	for _, peak := range []float64{full, coldPeak, specPeak} {
		if peak >= shippedLimitMiB {
			t.Errorf("peak RSS %.0f MiB, at or above the shipped limit of %d MiB", peak, shippedLimitMiB)
		}
	}
}
