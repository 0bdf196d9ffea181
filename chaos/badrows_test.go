package chaos

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// badRow is a row no application should write; want is the state its
// entry must settle in ("held" needs a reason naming the cause, given as
// a substring in reason).
type badRow struct {
	typ, name, body string
	key             string // engine or connector key
	kind            string
	want, reason    string
}

func badRows() []badRow {
	huge := strings.Repeat("x", 4<<20)
	manyFields := make(map[string]map[string]string, 20000)
	for i := 0; i < 20000; i++ {
		manyFields[fmt.Sprintf("f%d", i)] = map[string]string{"type": "text"}
	}
	wide, _ := json.Marshal(map[string]any{"fields": manyFields})
	deep := strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 500)
	e := func(typ, name, body, want, reason string) badRow {
		return badRow{typ: typ, name: name, body: body, kind: "engine", key: registry.EngineKey("", typ, name, ""), want: want, reason: reason}
	}
	c := func(name, body, want, reason string) badRow {
		return badRow{typ: "connector", name: name, body: body, kind: "connector", key: registry.NamedKey("", name, ""), want: want, reason: reason}
	}
	return []badRow{
		e("object", "not_an_object", `[1,2,3]`, "held", ""),
		e("object", "json_null", `null`, "held", ""),
		e("object", "json_string", `"just a string"`, "held", ""),
		e("object", "fields_wrong_type", `{"fields":"name,email"}`, "held", "fields"),
		e("object", "field_reference_number", `{"fields":{"x":{"type":"lookup","reference":5}}}`, "held", "reference"),
		e("object", "fields_array", `{"fields":[{"name":"x","type":"text"}]}`, "held", "fields"),
		e("object", "not_json", `{"fields": [`, "held", "JSON"),
		e("object", "single_quotes", `{'a': 1}`, "held", "JSON"),
		e("object", "nan", `NaN`, "held", "JSON object"),
		e("object", "empty", ``, "held", "JSON object"),
		e("view", "object_number", `{"object":42}`, "held", "object"),
		e("view", "missing_ref", `{"object":"no_such_object"}`, "held", "no_such_object"),
		e("flow", "nodes_wrong_type", `{"nodes":"start"}`, "held", "nodes"),
		e("object", "huge_body", `{"fields":{},"blob":"`+huge+`"}`, "held", "cap"),
		e("object", "wide_body", string(wide), "ready", ""),
		e("widget", "deep", deep, "ready", ""),
		e("object", "cyc_a", `{"fields":{"b":{"type":"lookup","reference":"cyc_b"}}}`, "ready", ""),
		e("object", "cyc_b", `{"fields":{"a":{"type":"lookup","reference":"cyc_a"}}}`, "ready", ""),
		e("object", "self_ref", `{"fields":{"parent":{"type":"lookup","reference":"self_ref"}}}`, "ready", ""),
		e("object", "ünï\tcödé\n😀\u202e", `{"fields":{}}`, "ready", ""),
		e("object", "'; DROP TABLE sys_metadata; --", `{"fields":{"x'); DELETE FROM sys_secret; --":{"type":"text"}}}`, "ready", ""),
		e("view", "Robert') OR 1=1 --", `{"object":"' OR ''='"}`, "held", ""),
		e("gizmo", "unknown_type", `{"anything":[1,{"b":null}]}`, "ready", ""),
		c("mcp_conn", `{"provider":"mcp","providerConfig":{"baseUrl":"http://127.0.0.1:1"},"auth":{"type":"none"}}`, "held", "mcp"),
		c("bad_url", `{"provider":"rest","providerConfig":{"baseUrl":"javascript:alert(1)"},"auth":{"type":"none"}}`, "held", "baseUrl"),
		c("no_cred", `{"provider":"rest","providerConfig":{"baseUrl":"http://127.0.0.1:1"},"auth":{"type":"bearer","credentialRef":"never_written"}}`, "held", "never_written"),
		c("auth_wrong_type", `{"provider":"rest","providerConfig":{"baseUrl":"http://127.0.0.1:1"},"auth":"bearer"}`, "held", "auth"),
		c("conn_array", `[]`, "held", ""),
	}
}

// Bad input in rows, on both stores: malformed JSON is refused by the
// store itself; wrong types, huge and deep bodies, unicode and control
// characters in keys, reference cycles, unknown types and providers,
// SQL-looking strings and broken datasources each settle with a clear
// reason (or ready, where the row is legal), no daemon panics, and the
// good entries around them stay ready.
func TestChaosBadRows(t *testing.T) {
	t.Parallel()
	for _, bk := range snapshottest.Backends {
		t.Run(bk.Kind, func(t *testing.T) {
			t.Parallel()
			url := bk.NewURL(t)
			r := newRig(t, "badrows-"+bk.Kind)
			testBadRows(t, r, url)
		})
	}
}

func testBadRows(t *testing.T, r *rig, url string) {
	up := okUpstream(t)
	good := loadSpace{objects: 8, credentials: 2, others: 0, upstream: up.URL}
	good.seed(t, url)
	storeURL := url
	if !strings.HasPrefix(url, "sqlite://") {
		storeURL = withApp(url, "chaos-bad")
	}
	d := r.newDaemon("bad-"+strings.SplitN(url, ":", 2)[0], storeURL)
	d.start()
	r.converge(url, d)
	r.searchStoreRows(url)

	rows := badRows()
	want := map[ref]badRow{}
	for i, b := range rows {
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, $2, $3, $4)`, fmt.Sprintf("bad%d", i), b.typ, b.name, b.body)
		want[ref{b.kind, b.key}] = b
	}
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, organization_id, type, name, metadata) VALUES ('org1', 'org "x"', 'object', 'o0', '{"fields":{}}')`)
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata, checksum) VALUES ('sum', 'object', 'bad_checksum', '{"fields":{}}', 'sha256:00')`)
	want[ref{"engine", registry.EngineKey("", "object", "bad_checksum", "")}] = badRow{want: "held", reason: "checksum"}
	dsRows := []struct{ name, driver, config, pool, reason string }{
		{"ds_oracle", "oracle", `{}`, `{}`, "oracle"},
		{"ds_mysql_url", "postgres", `{"url":"mysql://h/db"}`, `{}`, "url"},
		{"ds_pw_in_url", "postgres", `{"url":"postgres://u:hunter2@127.0.0.1:1/db"}`, `{}`, "password"},
		{"ds_config_string", "postgres", `"host=localhost"`, `{}`, "config"},
		{"ds_pool_negative", "postgres", `{"host":"127.0.0.1","port":1,"database":"x","username":"u"}`, `{"maxConns":-1}`, "maxConns"},
		{"ds_pool_huge", "postgres", `{"host":"127.0.0.1","port":1,"database":"x","username":"u"}`, `{"minConns":3000}`, "cap"},
		{"ds_sqlite_uri", "sqlite", `{"path":"file:/tmp/chaos-x.db?_pragma=journal_mode(wal)"}`, `{}`, "file:"},
		{"ds_\u0007bell; DROP TABLE x", "sqlite", `{"path":"/nonexistent/dir/x.db","extra":1}`, `{}`, ""},
	}
	for _, ds := range dsRows {
		snapshottest.Exec(t, url, upsertDatasource, ds.name, dsRecord(ds.name, ds.driver, ds.config, ds.pool, `{}`))
		want[ref{"datasource", registry.NamedKey("", ds.name, "")}] = badRow{want: "held", reason: ds.reason}
	}
	snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, NULL)`, "cleared\u2028ref")
	want[ref{"credential", registry.CredentialKey("cleared\u2028ref")}] = badRow{want: "held", reason: "cleared"}
	results.fault("bad rows")
	results.wrote(int64(len(rows) + len(dsRows) + 3))

	r.wantState = func(it item) string {
		if b, ok := want[ref{it.Kind, it.Key}]; ok {
			return b.want
		}
		return "ready"
	}
	results.converged("bad rows", r.converge(url, d))
	its, err := d.items()
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		b, ok := want[ref{it.Kind, it.Key}]
		if !ok {
			continue
		}
		t.Logf("%s/%q: %s %q", it.Kind, it.Key, it.State, it.Reason)
		if b.reason != "" && !strings.Contains(strings.ToLower(it.Reason), strings.ToLower(b.reason)) {
			t.Errorf("%s/%q: reason %q does not name %q", it.Kind, it.Key, it.Reason, b.reason)
		}
	}

	// Fixing a bad row heals it; the others are unaffected.
	snapshottest.Exec(t, url, `UPDATE sys_metadata SET metadata = '{"fields":{}}' WHERE id = 'bad0'`)
	delete(want, ref{"engine", "object/not_an_object"})
	results.wrote(1)
	r.converge(url, d)
	if s, err := d.status(); err != nil || !s.StoreUp {
		t.Errorf("status after bad rows: %+v %v", s, err)
	}
}
