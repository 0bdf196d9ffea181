package snapshottest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/snapshot/sqlite"
)

// schemaDump describes the schema objects and the schema-version rows.
func schemaDump(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	var parts []string
	if strings.HasPrefix(url, "sqlite://") {
		path, _ := sqlite.Path(url)
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, `SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master
UNION ALL SELECT 'v' || version FROM sys_reconciler_schema ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			parts = append(parts, s)
		}
		return strings.Join(parts, "\n")
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.relkind::text || ' ' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' UNION ALL SELECT 'fn ' || proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace
UNION ALL SELECT 'tg ' || tgname FROM pg_trigger WHERE NOT tgisinternal
UNION ALL SELECT 'v' || version FROM sys_reconciler_schema ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		parts = append(parts, s)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return strings.Join(parts, "\n")
}

var _ = fmt.Sprint
