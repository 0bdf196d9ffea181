//go:build objectstack

package objectstack

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
)

// Bodies the tests save through the node's metadata API, exactly as sent
// (the platform stores the text as the writer sent it, key order kept).
const (
	ProjectBody = `{"name":"rt_project","label":"Project","pluralLabel":"Projects",` +
		`"fields":{"title":{"type":"text","label":"Title","required":true}},` +
		`"sharingModel":"private","enable":{"apiEnabled":true}}`
	TaskBody = `{"name":"rt_task","label":"Task","pluralLabel":"Tasks",` +
		`"fields":{"subject":{"type":"text","label":"Subject","required":true},` +
		`"project":{"type":"lookup","reference":"rt_project","label":"Project"},` +
		`"parent":{"type":"lookup","reference":"rt_task","label":"Parent"}},` +
		`"sharingModel":"private","enable":{"apiEnabled":true}}`
	// TaskBodyV2 adds field priority to rt_task.
	TaskBodyV2 = `{"name":"rt_task","label":"Task","pluralLabel":"Tasks",` +
		`"fields":{"subject":{"type":"text","label":"Subject","required":true},` +
		`"project":{"type":"lookup","reference":"rt_project","label":"Project"},` +
		`"parent":{"type":"lookup","reference":"rt_task","label":"Parent"},` +
		`"priority":{"type":"number","label":"Priority"}},` +
		`"sharingModel":"private","enable":{"apiEnabled":true}}`
	ViewBody = `{"name":"rt_task_list","object":"rt_task",` +
		`"list":{"label":"All Tasks","type":"grid","data":{"provider":"object","object":"rt_task"},"columns":["subject","project"]}}`
	PermissionBody = `{"name":"rt_task_editor","objects":{"rt_task":{"allowRead":true,"allowEdit":true}},` +
		`"fields":{"rt_task.subject":{"readable":true,"editable":false}}}`
)

// App is what CreateApp made through a node's API.
type App struct {
	// Saved holds the answer of each metadata save, by "type/name".
	Saved map[string]SaveResult
	// Datasource is the runtime datasource's name; DatasourceURL the
	// database it points at; Canary its password.
	Datasource    string
	DatasourceURL string
	Canary        string
}

// CreateApp creates, through node's own API: objects rt_project and rt_task
// (lookups to rt_project and to itself), view rt_task_list, permission set
// rt_task_editor and runtime datasource rt_ext (a fresh database of the
// test server, its password a canary).
func CreateApp(t testing.TB, node *Node) App {
	t.Helper()
	api := node.API()
	app := App{Saved: map[string]SaveResult{}, Datasource: "rt_ext", Canary: "canary-" + randomHex(8)}
	app.Saved["object/rt_project"] = api.SaveMeta(t, "object", "rt_project", []byte(ProjectBody))
	app.Saved["object/rt_task"] = api.SaveMeta(t, "object", "rt_task", []byte(TaskBody))
	app.Saved["view/rt_task_list"] = api.SaveMeta(t, "view", "rt_task_list", []byte(ViewBody))
	app.Saved["permission/rt_task_editor"] = api.SaveMeta(t, "permission", "rt_task_editor", []byte(PermissionBody))

	app.DatasourceURL = testdb.New(t)
	api.CreateDatasource(t, DatasourceDraft(t, app.Datasource, app.DatasourceURL), app.Canary)
	return app
}

// DatasourceDraft is the body of a runtime PostgreSQL datasource called
// name on the database at dbURL, for CreateDatasource.
func DatasourceDraft(t testing.TB, name, dbURL string) map[string]any {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	port := 5432
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			t.Fatalf("port of %s: %v", dbURL, err)
		}
	}
	return map[string]any{
		"name":       name,
		"label":      "External",
		"driver":     "postgres",
		"schemaMode": "external",
		"config": map[string]any{
			"host": u.Hostname(), "port": port, "database": strings.TrimPrefix(u.Path, "/"), "username": u.User.Username(),
		},
	}
}
