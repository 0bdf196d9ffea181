package snapshottest

import (
	"slices"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// testCatalog: the columns of a table the platform would create, none for
// an absent one; the rows of one type and name in every scope.
func testCatalog(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		cat := s.(snapshot.Catalog)
		Exec(t, url, `CREATE TABLE rt_task (id varchar(255) PRIMARY KEY, created_at text, updated_at text, title text)`)
		cols, ok, err := cat.Columns(ctx, "rt_task")
		if err != nil || !ok || !slices.Equal(cols, []string{"id", "created_at", "updated_at", "title"}) {
			t.Fatalf("columns of rt_task: %v %v %v", cols, ok, err)
		}
		absent := []string{"rt_none", `rt"task`}
		if s.Kind() == "postgres" {
			absent = append(absent, "RT_TASK") // quoted names are case-sensitive there
		}
		for _, name := range absent {
			if cols, ok, err := cat.Columns(ctx, name); err != nil || ok || len(cols) != 0 {
				t.Fatalf("columns of absent %q: %v %v %v", name, cols, ok, err)
			}
		}
		Exec(t, url, `INSERT INTO sys_metadata (id, type, name, organization_id, state, metadata) VALUES
  ('o1', 'object', 'rt_task', NULL, 'active', '{"name":"rt_task"}'),
  ('o2', 'object', 'rt_task', 'org-1', 'draft', '{"name":"rt_task","label":"x"}'),
  ('o3', 'object', 'rt_other', NULL, 'active', '{}'),
  ('v1', 'view', 'rt_task', NULL, 'active', '{}')`)
		rows, err := cat.MetadataNamed(ctx, "object", "rt_task")
		if err != nil || len(rows) != 2 || rows[0].ID != "o1" || rows[1].ID != "o2" || rows[1].OrganizationID != "org-1" ||
			string(rows[0].Metadata) != `{"name":"rt_task"}` || rows[0].Revision == 0 {
			t.Fatalf("rows of object/rt_task: %+v %v", rows, err)
		}
	})
}
