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
	snapshottest.Exec(t, pgURL, upsertCredential, "ccred", canary)
	obj := `{"fields":{"name":{"type":"text"}}}`
	conn := connectorBody(up.URL, "ccred", "5s")
	rows := snapshottest.Impostors
	for _, rw := range rows {
		body := obj
		if rw.Type == "connector" {
			body = conn
		}
		snapshottest.Exec(t, pgURL, snapshottest.InsertImpostor, rw.ID, rw.Org, rw.Type, rw.Name, body)
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
		revs[revision(rw.ID)] = rw.ID
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
		if !last[rw.ID] {
			t.Errorf("row %s (org %q, %s %q) has no entry of its own", rw.ID, rw.Org, rw.Type, rw.Name)
		}
	}
	// Deleting the impostors leaves the real rows' entries in place.
	var fakes, reals []string
	for _, rw := range rows {
		if rw.Fake {
			fakes = append(fakes, rw.ID)
		} else {
			reals = append(reals, rw.ID)
		}
	}
	snapshottest.Exec(t, pgURL, `DELETE FROM sys_metadata WHERE id IN ('`+strings.Join(fakes, "', '")+`')`)
	results.wrote(int64(len(fakes)))
	evicted := 0
	eventually(t, "impostors gone", func() bool {
		m := matched()
		if m == nil {
			return false
		}
		for _, id := range fakes {
			if m[id] {
				return false
			}
		}
		return true
	})
	m := matched()
	for _, id := range reals {
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
