package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// withApp returns a PostgreSQL URL whose connections name themselves app
// in pg_stat_activity.
func withApp(raw, app string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// pool opens a pgx pool on url, closed when the test ends.
func pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// queryInt runs a query returning one integer, on a connection of its
// own (closed before it returns: the suite counts the server's
// connections).
func queryInt(t *testing.T, url, q string, args ...any) int64 {
	t.Helper()
	c := snapshottest.Connect(t, url)
	defer c.Close()
	return c.Int(t, q, args...)
}

// allRows returns every row of a table as JSON text (for the canary search).
func allRows(url, table string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := openDB(url)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	var q string
	if strings.HasPrefix(url, "sqlite://") {
		q = "SELECT * FROM " + table
	} else {
		q = "SELECT row_to_json(r)::text FROM " + pgx.Identifier{table}.Sanitize() + " r"
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err.Error()
		}
		fmt.Fprintln(&b, vals...)
	}
	return b.String()
}

// searchStoreRows adds the heartbeat and drift rows of the store to the
// scenario's canary search.
func (r *rig) searchStoreRows(url string) {
	for _, table := range []string{"sys_reconciler_replica", "sys_reconciler_drift"} {
		r.search(func() (string, string) { return table + " rows", allRows(url, table) })
	}
}

// migrate migrates the PostgreSQL store at url with the built binary.
func migrate(t *testing.T, url string) {
	t.Helper()
	cmd := exec.Command(binary, "migrate", "--store.url", url)
	cmd.Env = proctest.CleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reconciler migrate: %v\n%s", err, out)
	}
}

// privateStore starts a PostgreSQL cluster of the test's own holding a
// migrated database "store", and returns the cluster and its URL.
func privateStore(t *testing.T) (*testdb.Cluster, string) {
	t.Helper()
	c := testdb.NewCluster(t)
	if err := testdb.Exec(context.Background(), c.URL("postgres"), "CREATE DATABASE store"); err != nil {
		t.Fatal(err)
	}
	url := c.URL("store")
	migrate(t, url)
	return c, url
}

// secretValue is a credential value carrying the canary.
func secretValue(i int) string { return fmt.Sprintf("%s-%d", canary, i) }

// okUpstream accepts every request; its 401 answer would echo the
// Authorization header, so that a careless error path leaks the canary.
func okUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func connectorBody(baseURL, credRef, timeout string) string {
	b, _ := json.Marshal(map[string]any{
		"provider":       "rest",
		"providerConfig": map[string]any{"baseUrl": baseURL, "probe": map[string]string{"method": "GET", "path": "/health"}, "timeout": timeout},
		"auth":           map[string]string{"type": "bearer", "credentialRef": credRef},
		"enabled":        true,
	})
	return string(b)
}

func objectBody(rnd *rand.Rand, refs ...string) string {
	fields := map[string]any{"name": map[string]any{"type": "text"}, fmt.Sprintf("f%d", rnd.IntN(1000)): map[string]any{"type": "number"}}
	for _, r := range refs {
		fields["ref_"+r] = map[string]any{"type": "lookup", "reference": r}
	}
	b, _ := json.Marshal(map[string]any{"label": fmt.Sprintf("v%d", rnd.IntN(1<<30)), "fields": fields})
	return string(b)
}

const upsertMetadata = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET metadata = EXCLUDED.metadata, state = 'active', version = sys_metadata.version + 1`

// upsertDatasource writes a datasource as the platform stores it: a
// sys_metadata row of type datasource whose body is the record.
const upsertDatasource = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('datasource:' || $1, 'datasource', $1, $2)
ON CONFLICT (id) DO UPDATE SET metadata = EXCLUDED.metadata, state = 'active', version = sys_metadata.version + 1`

// dsRecord is a datasource record; config, pool and external are JSON.
func dsRecord(name, driver, config, pool, external string) string {
	return fmt.Sprintf(`{"name":%q,"driver":%q,"config":%s,"pool":%s,"external":%s,"active":true}`, name, driver, config, pool, external)
}

const upsertCredential = `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, $2)
ON CONFLICT (ref) DO UPDATE SET value = EXCLUDED.value`

// writeObjects rewrites n random objects of the first objects and one
// view, counting the writes.
func writeObjects(t *testing.T, url string, rnd *rand.Rand, objects, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		id := rnd.IntN(objects)
		snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("object:o%d", id), "object", fmt.Sprintf("o%d", id), objectBody(rnd))
	}
	snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("view:v%d", rnd.IntN(1000)), "view", fmt.Sprintf("v%d", rnd.IntN(1000)), `{"object":"o0"}`)
	results.wrote(int64(n + 1))
}
