package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for reading rows
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/sqlite"
)

// convergeWithin bounds every convergence wait: generous, never a speed
// assertion.
const convergeWithin = 60 * time.Second

// rig is one scenario: its daemons, and everything they said, searched for
// panics and the canary when the scenario ends.
type rig struct {
	t      testing.TB
	name   string
	dir    string
	client *http.Client

	mu      sync.Mutex
	daemons []*daemon
	texts   []func() (where string, text string) // more places to search at the end
	hits    []string

	// wantState returns the state an entry must settle in: "" accepts any
	// state but pending. Default: every entry ready.
	wantState func(it item) string
}

func newRig(t testing.TB, name string) *rig {
	t.Helper()
	dir, err := os.MkdirTemp("", "chaos-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, name: name, dir: dir, client: &http.Client{Timeout: 15 * time.Second},
		wantState: func(item) string { return "ready" }}
	results.scenario(name)
	t.Cleanup(func() {
		r.finish()
		_ = os.RemoveAll(dir)
	})
	return r
}

// seen searches one piece of output for the canary.
func (r *rig) seen(where string, b []byte) {
	if strings.Contains(string(b), canary) {
		r.mu.Lock()
		r.hits = append(r.hits, where)
		r.mu.Unlock()
	}
}

// search adds a place to search for the canary when the scenario ends.
func (r *rig) search(f func() (string, string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.texts = append(r.texts, f)
}

// finish stops every daemon, then searches their logs for panics and
// every collected text for the canary.
func (r *rig) finish() {
	r.mu.Lock()
	ds := append([]*daemon(nil), r.daemons...)
	r.mu.Unlock()
	for _, d := range ds {
		d.stop()
	}
	r.client.CloseIdleConnections()
	panics := 0
	for _, d := range ds {
		logs := d.log.String()
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "panic:") || strings.Contains(line, "panicked") || strings.HasPrefix(line, "goroutine ") {
				panics++
				r.t.Errorf("%s: panic in logs: %s", d.id, line)
			}
		}
		r.seen(d.id+" logs", []byte(logs))
		r.seen(d.id+" drift files", []byte(readDir(d.dir+"/drift")))
	}
	r.mu.Lock()
	texts := r.texts
	r.mu.Unlock()
	for _, f := range texts {
		where, text := f()
		r.seen(where, []byte(text))
	}
	r.mu.Lock()
	hits := r.hits
	r.mu.Unlock()
	for _, h := range hits {
		r.t.Errorf("canary secret found in %s", h)
	}
	results.with(func(f *figures) {
		f.panics += panics
		f.canaryHits += len(hits)
	})
	if r.t.Failed() {
		for _, d := range ds {
			// The whole output is kept for the post-mortem; the tail is shown.
			f, err := os.CreateTemp("", "chaos-"+d.id+"-*.log")
			if err == nil {
				_, _ = f.WriteString(d.log.String())
				f.Close()
				r.t.Logf("%s full output: %s", d.id, f.Name())
			}
			r.t.Logf("%s output (tail):\n%s", d.id, tail(d.log.String(), 6000))
		}
	}
}

// readDir returns every file under dir, concatenated.
func readDir(dir string) string {
	var b strings.Builder
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

// ref names an entry.
type ref struct{ kind, key string }

func (r ref) String() string { return r.kind + "/" + r.key }

// openDB opens the store at url with database/sql, for reading rows.
func openDB(url string) (*sql.DB, error) {
	if strings.HasPrefix(url, "sqlite://") {
		path, err := sqlite.Path(url)
		if err != nil {
			return nil, err
		}
		return sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)")
	}
	return sql.Open("pgx", url)
}

// desired returns what the rows at url desire: each entry's revision.
// It reads the tables independently of the snapshot package: only active
// rows are desired, keyed as the registry keys them.
func desired(ctx context.Context, url string) (map[ref]int64, error) {
	db, err := openDB(url)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil && strings.HasPrefix(url, "sqlite://") {
		tx, err = db.BeginTx(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck
	want := map[ref]int64{}
	add := func(q string, f func(rows *sql.Rows) error) error {
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := f(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	// Revisions are the row watermarks the triggers keep in
	// sys_reconciler_revision.
	err = add(`SELECT c.ref, r.revision FROM sys_connector_credential c
		JOIN sys_reconciler_revision r ON r.source = 'sys_connector_credential' AND r.key = c.ref`, func(rows *sql.Rows) error {
		var k string
		var rev int64
		err := rows.Scan(&k, &rev)
		want[ref{"credential", registry.CredentialKey(k)}] = rev
		return err
	})
	if err == nil {
		err = add(`SELECT s.id, r.revision FROM sys_secret s
			JOIN sys_reconciler_revision r ON r.source = 'sys_secret' AND r.key = s.id`, func(rows *sql.Rows) error {
			var k string
			var rev int64
			err := rows.Scan(&k, &rev)
			want[ref{"credential", registry.SecretKey(k)}] = rev
			return err
		})
	}
	if err == nil {
		err = add(`SELECT coalesce(m.organization_id, ''), coalesce(m.package_id, ''), m.type, m.name, coalesce(m.metadata, ''), r.revision
			FROM sys_metadata m JOIN sys_reconciler_revision r ON r.source = 'sys_metadata' AND r.key = m.id
			WHERE m.state = 'active'`, func(rows *sql.Rows) error {
			var org, pkg, typ, name, body string
			var rev int64
			if err := rows.Scan(&org, &pkg, &typ, &name, &body, &rev); err != nil {
				return err
			}
			var b struct {
				Enabled *bool `json:"enabled"`
				Active  *bool `json:"active"`
			}
			_ = json.Unmarshal([]byte(body), &b)
			switch typ {
			case "connector":
				if b.Enabled == nil || *b.Enabled {
					want[ref{"connector", registry.NamedKey(org, name, pkg)}] = rev
				}
			case "datasource":
				if b.Active == nil || *b.Active {
					want[ref{"datasource", registry.NamedKey(org, name, pkg)}] = rev
				}
			default:
				want[ref{"engine", registry.EngineKey(org, typ, name, pkg)}] = rev
			}
			return nil
		})
	}
	return want, err
}

// mismatch is one difference between a daemon and the rows.
type mismatch struct {
	daemon string
	ref    ref
	what   string
	missed bool // a row's revision (or its presence) did not reach the daemon
}

// diff compares a daemon's items with the rows.
func (r *rig) diff(d *daemon, want map[ref]int64) ([]mismatch, error) {
	its, err := d.items()
	if err != nil {
		return nil, err
	}
	var out []mismatch
	got := map[ref]item{}
	for _, it := range its {
		k := ref{it.Kind, it.Key}
		got[k] = it
		rev, ok := want[k]
		switch {
		case !ok:
			out = append(out, mismatch{d.id, k, fmt.Sprintf("orphan (revision %d, %s)", it.Revision, it.State), true})
		case it.Revision != rev:
			out = append(out, mismatch{d.id, k, fmt.Sprintf("revision %d, rows say %d", it.Revision, rev), true})
		case it.State == "pending":
			out = append(out, mismatch{d.id, k, "pending", false})
		default:
			if ws := r.wantState(it); ws != "" && it.State != ws {
				out = append(out, mismatch{d.id, k, fmt.Sprintf("state %s (%s), want %s", it.State, it.Reason, ws), false})
			} else if it.State != "ready" && strings.TrimSpace(it.Reason) == "" {
				out = append(out, mismatch{d.id, k, "not ready without a reason", false})
			}
		}
	}
	for k, rev := range want {
		if _, ok := got[k]; !ok {
			out = append(out, mismatch{d.id, k, fmt.Sprintf("missing (rows say revision %d)", rev), true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.String() < out[j].ref.String() })
	return out, nil
}

// converge waits until every given daemon's items equal the rows at url,
// item by item, and returns how long it took. After the deadline it
// records what is left diverged and fails the test.
func (r *rig) converge(url string, ds ...*daemon) time.Duration {
	r.t.Helper()
	start := time.Now()
	deadline := time.NewTimer(convergeWithin)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last []mismatch
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		want, err := desired(ctx, url)
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("read rows: %w", err)
		} else {
			last, lastErr = nil, nil
			for _, d := range ds {
				m, err := r.diff(d, want)
				if err != nil {
					lastErr = fmt.Errorf("%s: %w", d.id, err)
					break
				}
				last = append(last, m...)
			}
			if lastErr == nil && len(last) == 0 {
				return time.Since(start)
			}
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			missed := 0
			for _, m := range last {
				if m.missed {
					missed++
				}
				r.t.Errorf("%s: %s: %s", m.daemon, m.ref, m.what)
			}
			results.with(func(f *figures) {
				f.missed += missed
				f.diverged += len(last)
			})
			r.t.Fatalf("not converged within %s (%d differences; last error: %v)", convergeWithin, len(last), lastErr)
			return 0
		}
	}
}

// faultConverged records a fault of a type and the time to converge after it.
func (r *rig) faultConverged(kind, url string, ds ...*daemon) time.Duration {
	r.t.Helper()
	results.fault(kind)
	took := r.converge(url, ds...)
	results.converged(kind, took)
	return took
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	return proctest.Eventually(t, convergeWithin, 50*time.Millisecond, what, cond)
}
