package chaos

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestChaosKeyCollisions writes rows whose names mimic another
// organization's keys — an org-less connector named "acme:crm" beside org
// acme's "crm", an org-less type "acme:object" beside org acme's object —
// and counts the rows that share a registry entry with another row
// (collisions) and the entries a delete of the impostor took with it.
// Entries are matched to rows by revision, so the count does not depend on
// how keys are spelled.
func TestChaosKeyCollisions(t *testing.T) {
	t.Parallel()
	pgURL := snapshottest.NewPostgresURL(t)
	r := newRig(t, "collisions")
	up := okUpstream(t)
	execSQL(t, pgURL, upsertCredential, "ccred", canary)
	type row struct{ id, org, typ, name, body string }
	obj := `{"fields":{"name":{"type":"text"}}}`
	conn := connectorBody(up.URL, "ccred", "5s")
	rows := []row{
		{"c-real", "acme", "connector", "crm", conn},
		{"c-fake", "", "connector", "acme:crm", conn},
		{"o-real", "acme", "object", "x", obj},
		{"o-fake", "", "acme:object", "x", obj},
		{"o-org-colon", "a:b", "object", "y", obj},
		{"o-org-split", "a", "b:object", "y", obj},
		{"o-slash", "", "object", "p/q", obj},
		{"o-slash-type", "", "object/p", "q", obj},
	}
	for _, rw := range rows {
		execSQL(t, pgURL, `INSERT INTO sys_metadata (id, organization_id, type, name, metadata) VALUES ($1, NULLIF($2, ''), $3, $4, $5)`, rw.id, rw.org, rw.typ, rw.name, rw.body)
	}
	results.fault("hostile rows")
	results.wrote(int64(len(rows) + 1))
	revision := func(id string) int64 {
		db, err := openDB(pgURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var rev int64
		if err := db.QueryRow(`SELECT revision FROM sys_reconciler_revision WHERE source = 'sys_metadata' AND key = $1`, id).Scan(&rev); err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		return rev
	}
	revs := map[int64]string{}
	for _, rw := range rows {
		revs[revision(rw.id)] = rw.id
	}
	d := r.newDaemon("collisions", withApp(pgURL, "chaos-collisions"), set("drift.schedule", ""))
	d.start()
	// matched returns the rows that have an entry of their own.
	matched := func() map[string]bool {
		its, err := d.items()
		if err != nil {
			return nil
		}
		m := map[string]bool{}
		for _, it := range its {
			if id, ok := revs[it.Revision]; ok && it.State != "pending" && (it.Kind == "connector" || it.Kind == "engine") {
				m[id] = true
			}
		}
		return m
	}
	// Settled: the daemon's registries stopped changing for these rows.
	var last map[string]bool
	stable := 0
	eventually(t, "entries settled", func() bool {
		m := matched()
		if m != nil && fmt.Sprint(m) == fmt.Sprint(last) {
			stable++
		} else {
			stable = 0
		}
		last = m
		return stable >= 20 && len(m) > 0
	})
	collisions := len(rows) - len(last)
	for _, rw := range rows {
		if !last[rw.id] {
			t.Errorf("row %s (org %q, %s %q) has no entry of its own", rw.id, rw.org, rw.typ, rw.name)
		}
	}
	// Deleting the impostors leaves the real rows' entries in place.
	execSQL(t, pgURL, `DELETE FROM sys_metadata WHERE id IN ('c-fake', 'o-fake', 'o-org-split', 'o-slash-type')`)
	results.wrote(4)
	evicted := 0
	eventually(t, "impostors gone", func() bool {
		m := matched()
		return m != nil && !m["c-fake"] && !m["o-fake"] && !m["o-org-split"] && !m["o-slash-type"]
	})
	m := matched()
	for _, id := range []string{"c-real", "o-real", "o-org-colon", "o-slash"} {
		if !m[id] {
			evicted++
			t.Errorf("deleting an impostor evicted %s", id)
		}
	}
	fds, rss := procFigures(d.pid())
	hostileResults.add(hostileRow{attack: collisionAttack, measure: collisionMeasure, got: fmt.Sprintf("%d; %d", collisions, evicted), bound: "0; 0", fds: fds, rssMiB: rss})
	if t.Failed() {
		its, _ := d.items()
		for _, it := range its {
			if _, ok := revs[it.Revision]; ok || strings.Contains(it.Key, "acme") {
				t.Logf("entry %s %q rev %d %s", it.Kind, it.Key, it.Revision, it.State)
			}
		}
	}
}
