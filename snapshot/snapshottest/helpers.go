package snapshottest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// InsertMetadata writes an object row of sys_metadata on either store:
// $1 its id (and name), an empty body. Writers set only the platform's
// columns, never a revision.
const InsertMetadata = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, 'object', $1, '{"fields":{}}')`

// Ctx is a context for one test: two minutes, cancelled when it ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Relist relists s, failing the test on error.
func Relist(t *testing.T, s snapshot.Store) (snapshot.Rows, snapshot.Cursor) {
	t.Helper()
	rows, c, err := s.Relist(Ctx(t))
	if err != nil {
		t.Fatalf("relist: %v", err)
	}
	return rows, c
}

// Poll polls s from c, failing the test on error.
func Poll(t *testing.T, s snapshot.Store, c snapshot.Cursor) ([]snapshot.Address, snapshot.Cursor) {
	t.Helper()
	addrs, next, err := s.Poll(Ctx(t), c)
	if err != nil {
		t.Fatalf("poll from %s: %v", c, err)
	}
	return addrs, next
}

// WantAddrs fails the test unless the distinct addresses of got, as
// "table/key", are exactly want.
func WantAddrs(t *testing.T, got []snapshot.Address, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	g := keySet(got)
	if g == nil {
		g = []string{}
	}
	slices.Sort(want)
	if !slices.Equal(g, want) {
		t.Fatalf("poll returned %v, want %v", g, want)
	}
}

// keySet returns the distinct addresses, sorted, as "table/key".
func keySet(addrs []snapshot.Address) []string {
	var out []string
	for _, a := range addrs {
		k := string(a.Table) + "/" + a.Key
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Revisions maps "table/key" to the revision of every row in rows.
func Revisions(rows snapshot.Rows) map[string]int64 {
	out := map[string]int64{}
	for _, r := range rows.Metadata {
		out["sys_metadata/"+r.ID] = r.Revision
	}
	for _, r := range rows.Secrets {
		out["sys_secret/"+r.ID] = r.Revision
	}
	for _, r := range rows.Credentials {
		out["sys_connector_credential/"+r.Ref] = r.Revision
	}
	return out
}

// DiffLines lists the lines of a missing from b ("- ") and those of b
// missing from a ("+ "), for a failure message.
func DiffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
