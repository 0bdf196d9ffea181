//go:build objectstack

package objectstack

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReconcilerAdoptsNode runs the reconciler on the database of a real
// node: migrate adopts the platform's tables without changing them, every
// item the node wrote is ready with the node's own checksums verified, the
// node's later writes reach the daemon through the triggers, and the node
// still boots, reads and writes with no new schema complaint.
func TestReconcilerAdoptsNode(t *testing.T) {
	ctx := context.Background()
	stack := NewStack(t)
	node := stack.StartNode("a")
	app := CreateApp(t, node)

	// A baseline of the node's complaints about its schema, before the
	// reconciler touched the database: the same restart, without us.
	node.Restart()
	baseline := complaints(node.CurrentLog())
	t.Logf("the node's own complaints on a restart without the reconciler: %d lines", len(baseline))
	planBefore, err := node.MigratePlan()
	if err != nil {
		t.Fatal(err)
	}

	// Adopt: migrate, twice; the platform's tables keep their exact shape.
	platform, err := Tables(ctx, stack.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	before, err := Catalog(ctx, stack.DatabaseURL, platform)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	}
	after, err := Catalog(ctx, stack.DatabaseURL, platform)
	if err != nil {
		t.Fatal(err)
	}
	if gone, added := Diff(before, after); len(gone)+len(added) > 0 {
		t.Fatalf("migrate changed the platform's tables:\nbefore only:\n  %s\nafter only:\n  %s",
			strings.Join(gone, "\n  "), strings.Join(added, "\n  "))
	}

	// Run: every item the node wrote is ready.
	daemon := StartDaemon(t, reconcilerBin, []string{"OS_SECRET_KEY=" + stack.SecretKey},
		"--store.url", stack.DatabaseURL, "--replica_id", "e2e-a", "--secrets.key_env", "OS_SECRET_KEY")
	orgView := ""
	started := time.Now()
	items := daemon.WaitItems(90*time.Second, "every item ready", func(items []Item) error {
		want := []string{"object/rt_project", "object/rt_task", "permission/rt_task_editor"}
		for _, key := range want {
			if FindItem(items, "engine", key) == nil {
				return fmt.Errorf("no engine item %s", key)
			}
		}
		if findNamed(items, "engine", "view", "rt_task_list") == nil {
			return fmt.Errorf("no engine item for view rt_task_list")
		}
		if findNamed(items, "datasource", "", app.Datasource) == nil {
			return fmt.Errorf("no datasource item %s", app.Datasource)
		}
		for _, it := range items {
			if it.State != "ready" {
				return fmt.Errorf("%s %s is %s: %s", it.Kind, it.Key, it.State, it.Reason)
			}
		}
		return nil
	})
	t.Logf("every item ready %s after the daemon started:", time.Since(started).Round(100*time.Millisecond))
	for _, it := range items {
		t.Logf("  %s %s (org %q type %q name %q package %q) revision %d %s", it.Kind, it.Key, it.Org, it.Type, it.Name, it.Package, it.Revision, it.State)
	}
	for _, it := range items {
		if strings.Contains(it.Reason, "checksum mismatch") {
			t.Errorf("%s %s: %s", it.Kind, it.Key, it.Reason)
		}
	}
	view := findNamed(items, "engine", "view", "rt_task_list")
	orgView = view.Org
	if !regexp.MustCompile(`^org_[a-z0-9]+$`).MatchString(orgView) || view.Key != orgView+":view/rt_task_list" {
		t.Errorf("view item: org %q, key %q; want the node's organization and key <org>:view/rt_task_list", view.Org, view.Key)
	}
	for _, key := range []string{"object/rt_project", "object/rt_task", "permission/rt_task_editor"} {
		if it := FindItem(items, "engine", key); it.Org != "" || it.Package != "" {
			t.Errorf("%s: org %q, package %q; want none (the node saves it env-wide)", key, it.Org, it.Package)
		}
	}

	// The node's own later writes reach the daemon: an update and a delete.
	task := *FindItem(items, "engine", "object/rt_task")
	api := node.API()
	api.SaveMeta(t, "object", "rt_task", []byte(TaskBodyV2))
	api.DeleteMeta(t, "view", "rt_task_list")
	daemon.WaitItems(30*time.Second, "the update and the delete followed", func(items []Item) error {
		it := FindItem(items, "engine", "object/rt_task")
		if it == nil || it.Revision <= task.Revision || it.Signature == task.Signature || it.State != "ready" {
			return fmt.Errorf("object/rt_task: %+v, want a revision above %d, ready", it, task.Revision)
		}
		if v := findNamed(items, "engine", "view", "rt_task_list"); v != nil {
			return fmt.Errorf("view %s still listed after its row was deleted", v.Key)
		}
		return nil
	})

	// The node still boots, reads and writes, and says nothing new about
	// its schema.
	node.Restart()
	restart := node.CurrentLog()
	for _, bad := range []string{"sys_reconcile", "sys_connector_credential", "unknown column"} {
		if i := strings.Index(strings.ToLower(restart), bad); i >= 0 {
			t.Errorf("the node's log after migrate mentions %q: …%s…", bad, restart[max(0, i-200):min(len(restart), i+200)])
		}
	}
	for line := range complaints(restart) {
		if !baseline[line] {
			t.Errorf("new complaint in the node's log after migrate: %s", line)
		}
	}
	planAfter, err := node.MigratePlan()
	if err != nil {
		t.Fatal(err)
	}
	if planAfter.Total != planBefore.Total || len(planAfter.Changes) != len(planBefore.Changes) || len(planAfter.Pending) != len(planBefore.Pending) {
		t.Errorf("os migrate plan: %d changes %s pending %s after migrate, %d changes %s pending %s before",
			planAfter.Total, planAfter.Changes, planAfter.Pending, planBefore.Total, planBefore.Changes, planBefore.Pending)
	}

	api = node.API()
	api.Must(t, http.StatusCreated, "POST", "/api/v1/data/rt_note", map[string]any{"title": "after restart"})
	if r := api.Must(t, http.StatusOK, "GET", "/api/v1/data/rt_note?limit=5", nil); !strings.Contains(string(r.Body), "after restart") {
		t.Errorf("rt_note records after restart: %s", r.Body)
	}
	api.Must(t, http.StatusOK, "GET", "/api/v1/meta/object/rt_task", nil)
	saved := api.SaveMeta(t, "object", "rt_after", []byte(`{"name":"rt_after","label":"After","fields":{"title":{"type":"text"}},"sharingModel":"private","enable":{"apiEnabled":true}}`))
	if saved.State != "active" {
		t.Errorf("save after restart: %+v", saved)
	}
	api.Must(t, http.StatusCreated, "POST", "/api/v1/data/rt_after", map[string]any{"title": "x"})
	daemon.WaitItems(30*time.Second, "an object saved after the restart", func(items []Item) error {
		if it := FindItem(items, "engine", "object/rt_after"); it == nil || it.State != "ready" {
			return fmt.Errorf("object/rt_after: %+v", it)
		}
		return nil
	})
	if dss, err := api.Datasources(); err != nil {
		t.Error(err)
	} else if d := find(dss, app.Datasource); d == nil || d.Status != "ok" {
		t.Errorf("datasources after restart: %+v", dss)
	}

	if code := daemon.Stop(); code != 0 {
		t.Errorf("reconciler exited %d on SIGTERM", code)
	}
	if strings.Contains(daemon.Output(), app.Canary) {
		t.Error("the reconciler's output holds the datasource password")
	}
}

// findNamed returns the item of kind whose type (when typ is not "") and
// name match, or nil.
func findNamed(items []Item, kind, typ, name string) *Item {
	for i := range items {
		it := &items[i]
		if it.Kind == kind && it.Name == name && (typ == "" || it.Type == typ) {
			return it
		}
	}
	return nil
}

var (
	ansi      = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
)

// complaints returns the lines of a node's log where it complains about
// its database (errors the SQL backend refused, error-level lines, any
// mention of a drop), with timestamps and colors taken out so two boots
// compare.
func complaints(log string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		line = timestamp.ReplaceAllString(ansi.ReplaceAllString(line, ""), "")
		if strings.Contains(line, "DATABASE_ERROR") || strings.Contains(line, " ERROR ") || strings.Contains(strings.ToLower(line), "drop") {
			out[strings.TrimSpace(line)] = true
		}
	}
	return out
}
