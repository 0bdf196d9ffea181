package postgres_test

import (
	"context"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// platformDump is the schema dump (pg_dump --schema-only) of a database
// created by a real ObjectStack 17.4 node: 75 sys_* tables.
const platformDump = "testdata/objectstack-17.4-ddl.sql"

// loadPlatformDump creates the platform's tables in the database at dbURL
// from the dump, as the node would have. psql meta-commands and ownership
// changes (the dump's role may not exist here) are left out.
func loadPlatformDump(t *testing.T, dbURL string) {
	t.Helper()
	b, err := os.ReadFile(platformDump)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `\`) || (strings.HasPrefix(line, "ALTER TABLE ") && strings.Contains(line, " OWNER TO ")) {
			continue
		}
		keep = append(keep, line)
	}
	if err := testdb.Exec(snapshottest.Ctx(t), dbURL, strings.Join(keep, "\n")); err != nil {
		t.Fatalf("load %s: %v", platformDump, err)
	}
}

func pgConnect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(snapshottest.Ctx(t), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func queryLines(t *testing.T, conn *pgx.Conn, query string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(snapshottest.Ctx(t), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return lines
}

// publicTables lists the tables of schema public.
func publicTables(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	return queryLines(t, conn, `SELECT relname::text FROM pg_class
WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') ORDER BY 1`)
}

// catalogSQL describes tables (of schema public) as the catalog holds
// them: the relation itself (kind, owner, grants, options, row security),
// every column (position, type, nullability, default, collation, identity,
// generation; from pg_catalog and from information_schema), every index
// with its definition and every constraint with its definition. Triggers
// are listed apart.
const catalogSQL = `WITH t AS (
  SELECT c.oid, c.relname::text AS rel FROM pg_class c
  WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND c.relname = ANY($1)
)
SELECT line FROM (
  SELECT t.rel || ' relation kind=' || c.relkind::text || ' owner=' || c.relowner::regrole || ' acl=' || coalesce(c.relacl::text, '-')
    || ' options=' || coalesce(c.reloptions::text, '-') || ' persistence=' || c.relpersistence::text
    || ' rls=' || c.relrowsecurity || ' replident=' || c.relreplident::text AS line
  FROM t JOIN pg_class c ON c.oid = t.oid
  UNION ALL
  SELECT t.rel || ' column ' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
    || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
    || ' collation=' || coalesce(a.attcollation::regcollation::text, '-') || ' identity=' || a.attidentity::text
    || ' generated=' || a.attgenerated::text || ' stats=' || a.attstattarget
  FROM t JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  UNION ALL
  SELECT t.rel || ' infoschema ' || ic.ordinal_position || ' ' || ic.column_name || ' ' || ic.data_type
    || ' len=' || coalesce(ic.character_maximum_length::text, '-') || ' nullable=' || ic.is_nullable
    || ' default=' || coalesce(ic.column_default, '-')
  FROM t JOIN information_schema.columns ic ON ic.table_schema = 'public' AND ic.table_name = t.rel
  UNION ALL
  SELECT t.rel || ' index ' || pg_get_indexdef(i.indexrelid) || ' valid=' || i.indisvalid
  FROM t JOIN pg_index i ON i.indrelid = t.oid
  UNION ALL
  SELECT t.rel || ' constraint ' || co.conname || ' ' || co.contype::text || ' ' || pg_get_constraintdef(co.oid)
  FROM t JOIN pg_constraint co ON co.conrelid = t.oid
) x ORDER BY line`

func catalog(t *testing.T, conn *pgx.Conn, tables []string) string {
	t.Helper()
	lines := queryLines(t, conn, catalogSQL, tables)
	if len(lines) == 0 {
		t.Fatalf("empty catalog for %v", tables)
	}
	return strings.Join(lines, "\n")
}

// userTriggers lists "table trigger" for every trigger that is not a
// constraint's own in schema public.
func userTriggers(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	return queryLines(t, conn, `SELECT c.relname || ' ' || tg.tgname FROM pg_trigger tg
JOIN pg_class c ON c.oid = tg.tgrelid
WHERE NOT tg.tgisinternal AND c.relnamespace = 'public'::regnamespace ORDER BY 1`)
}

// TestAdoptPlatformDatabase: migrate on a database that a real node
// created and wrote to leaves every platform table exactly as it was,
// adds only triggers on the source tables, gives the existing rows
// revisions and journals the node's later writes, whatever role and
// search_path the node's connections use.
func TestAdoptPlatformDatabase(t *testing.T) {
	t.Parallel()
	ctx := snapshottest.Ctx(t)
	dbURL := testdb.New(t)
	loadPlatformDump(t, dbURL)
	admin := pgConnect(t, dbURL)

	// The node's writes before the reconciler ever ran.
	for _, q := range []string{
		`INSERT INTO sys_metadata (id, name, type, scope, metadata, state, version, checksum, source)
VALUES ('Xk2_mP9qLr4vTn8wYz1aB', 'account', 'object', 'platform', '{"name":"account","fields":{"name":{"type":"text"}}}', 'active', 1, 'c0ffee', 'api')`,
		`INSERT INTO sys_metadata (id, name, type, metadata, state, organization_id, version)
VALUES ('v_all_accounts', 'all_accounts', 'view', '{"object":"account"}', 'active', 'org_1', 1)`,
		`INSERT INTO sys_metadata (id, name, type, metadata, state, version)
VALUES ('Xk2_draft', 'account', 'object', '{"name":"account","fields":{}}', 'draft', 2)`,
		`INSERT INTO sys_metadata (id, name, type, metadata, state, version, checksum)
VALUES ('7d0c5f7e-3b1a-4f5e-9c2d-1a2b3c4d5e6f', 'warehouse', 'datasource',
  '{"name":"warehouse","driver":"postgres","external":{"credentialsRef":"sys_secret:sec_9f8e"}}', 'active', 3, NULL)`,
		`INSERT INTO sys_secret (id, namespace, key, kms_key_id, alg, version, ciphertext)
VALUES ('sec_9f8e', 'datasource', 'warehouse', 'local:v1', 'aes-256-gcm', 1, 'djE6Y2lwaGVy')`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	node := platformRole(t, dbURL)
	tables := publicTables(t, admin)
	if len(tables) != 75 || slices.Contains(tables, "sys_connector_credential") {
		t.Fatalf("the dump has %d tables (%v), want the node's 75", len(tables), tables)
	}
	before := catalog(t, admin, tables)
	if tg := userTriggers(t, admin); len(tg) != 0 {
		t.Fatalf("triggers before migrate: %v", tg)
	}

	s, err := snapshot.Open(dbURL, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for i := range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("migrate #%d: %v", i+1, err)
		}
	}
	if after := catalog(t, admin, tables); after != before {
		t.Fatalf("migrate changed the platform's tables:\n%s", snapshottest.DiffLines(before, after))
	}
	wantTriggers := []string{
		"sys_connector_credential sys_reconcile_journal", "sys_connector_credential sys_reconcile_stamp",
		"sys_connector_credential sys_reconcile_truncate",
		"sys_metadata sys_reconcile_journal", "sys_metadata sys_reconcile_truncate",
		"sys_secret sys_reconcile_journal", "sys_secret sys_reconcile_truncate",
	}
	if tg := userTriggers(t, admin); !slices.Equal(tg, wantTriggers) {
		t.Fatalf("triggers after migrate: %v, want %v", tg, wantTriggers)
	}
	added := slices.DeleteFunc(publicTables(t, admin), func(n string) bool { return slices.Contains(tables, n) })
	if want := []string{"sys_connector_credential", "sys_reconcile_journal", "sys_reconciler_credential_owner", "sys_reconciler_drift",
		"sys_reconciler_guard", "sys_reconciler_guard_release", "sys_reconciler_lease", "sys_reconciler_replica", "sys_reconciler_revision",
		"sys_reconciler_schema", "sys_reconciler_state"}; !slices.Equal(added, want) {
		t.Fatalf("migrate added tables %v, want %v", added, want)
	}

	// The rows written before migrate have revisions.
	rows, c := snapshottest.Relist(t, s)
	var ids []string
	for _, m := range rows.Metadata {
		ids = append(ids, m.ID)
		if m.Revision <= 0 {
			t.Errorf("pre-existing row %s has revision %d", m.ID, m.Revision)
		}
	}
	if want := []string{"7d0c5f7e-3b1a-4f5e-9c2d-1a2b3c4d5e6f", "Xk2_mP9qLr4vTn8wYz1aB", "v_all_accounts"}; !slices.Equal(ids, want) {
		t.Fatalf("relist after adoption: %v, want the active rows %v", ids, want)
	}
	if len(rows.Secrets) != 1 || rows.Secrets[0].Revision <= 0 || rows.Secrets[0].Ciphertext.Reveal() != "djE6Y2lwaGVy" {
		t.Fatalf("relist secrets after adoption: %+v", rows.Secrets)
	}
	if n := snapshottest.Connect(t, dbURL).Int(t, `SELECT count(*) FROM sys_reconciler_revision`); n != 5 {
		t.Fatalf("%d revisions after adoption, want one per row (5)", n)
	}

	// The node's later writes, through a role of its own that may touch
	// only its tables, and a search_path without the schema.
	for _, q := range []string{
		`INSERT INTO public.sys_metadata (id, name, type, metadata, state, organization_id, version)
VALUES ('v_my_accounts', 'my_accounts', 'view', '{"object":"account"}', 'active', 'org_1', 1)`,
		`UPDATE public.sys_metadata SET metadata = '{"name":"account","fields":{}}', version = version + 1,
  updated_at = CURRENT_TIMESTAMP WHERE id = 'Xk2_mP9qLr4vTn8wYz1aB'`,
		`DELETE FROM public.sys_metadata WHERE id = 'v_all_accounts'`,
		`UPDATE public.sys_secret SET ciphertext = 'djE6cm90YXRlZA', rotated_at = CURRENT_TIMESTAMP WHERE id = 'sec_9f8e'`,
	} {
		if _, err := node.Exec(ctx, q); err != nil {
			t.Fatalf("the node's write %s: %v", q, err)
		}
	}
	got, _ := snapshottest.Poll(t, s, c)
	snapshottest.WantAddrs(t, got, "sys_metadata/v_my_accounts", "sys_metadata/Xk2_mP9qLr4vTn8wYz1aB", "sys_metadata/v_all_accounts", "sys_secret/sec_9f8e")
	read, err := s.Read(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	old := snapshottest.Revisions(rows)
	for k, rev := range snapshottest.Revisions(read) {
		if rev <= old[k] || rev <= 0 {
			t.Errorf("%s: revision %d after the node's write, was %d", k, rev, old[k])
		}
	}
	if len(read.Metadata) != 2 || len(read.Secrets) != 1 {
		t.Fatalf("read after the node's writes: %+v", read)
	}
	if after := catalog(t, admin, tables); after != before {
		t.Fatalf("the platform's tables changed:\n%s", snapshottest.DiffLines(before, after))
	}
}

// platformRole returns a connection as a new role that, like the node's,
// may use the platform tables only, with a search_path that does not name
// their schema. The role is dropped when the test ends.
func platformRole(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	ctx := snapshottest.Ctx(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	role := strings.TrimPrefix(u.Path, "/") + "_node" // one per test database
	ident := pgx.Identifier{role}.Sanitize()
	admin := testdb.AdminURL(t)
	if err := testdb.Exec(ctx, admin, "CREATE ROLE "+ident+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = testdb.Exec(ctx, dbURL, "DROP OWNED BY "+ident)
		_ = testdb.Exec(ctx, admin, "DROP ROLE IF EXISTS "+ident)
	})
	if err := testdb.Exec(ctx, dbURL, "GRANT USAGE ON SCHEMA public TO "+ident+
		"; GRANT SELECT, INSERT, UPDATE, DELETE ON public.sys_metadata, public.sys_secret TO "+ident); err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	q := u.Query()
	q.Set("search_path", "pg_catalog")
	u.RawQuery = q.Encode()
	conn := pgConnect(t, u.String())
	var sp string
	if err := conn.QueryRow(ctx, "SHOW search_path").Scan(&sp); err != nil || sp != "pg_catalog" {
		t.Fatalf("node connection search_path = %q, %v", sp, err)
	}
	return conn
}

// TestMigrateCreatesPlatformShape: on an empty database, migrate creates
// sys_metadata and sys_secret exactly as a real node does.
func TestMigrateCreatesPlatformShape(t *testing.T) {
	t.Parallel()
	ctx := snapshottest.Ctx(t)
	nodeURL := testdb.New(t)
	loadPlatformDump(t, nodeURL)
	ours := testdb.New(t)
	s, err := snapshot.Open(ours, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tables := []string{"sys_metadata", "sys_secret"}
	want, got := catalog(t, pgConnect(t, nodeURL), tables), catalog(t, pgConnect(t, ours), tables)
	if got != want {
		t.Fatalf("migrate's platform tables differ from the node's:\n%s", snapshottest.DiffLines(want, got))
	}
}
