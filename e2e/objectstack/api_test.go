//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/hashspec"
	"github.com/objectstack-fleet/reconciler/internal/ossecret"
)

// TestNodeAPI boots a real node, creates an app through its API and reads
// the rows the platform wrote back with SQL: the shapes the reconciler
// adopts.
func TestNodeAPI(t *testing.T) {
	stack := NewStack(t)
	node := stack.StartNode("a")
	h, err := node.Health()
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != "17.4.0" || h.Status != "ok" {
		t.Fatalf("health = %+v, want status ok, version 17.4.0", h)
	}
	app := CreateApp(t, node)
	ctx := context.Background()

	for _, c := range []struct {
		typ, name, body string
		orgScoped       bool
	}{
		{"object", "rt_project", ProjectBody, false},
		{"object", "rt_task", TaskBody, false},
		{"view", "rt_task_list", ViewBody, true},
		{"permission", "rt_task_editor", PermissionBody, false},
	} {
		row, err := MetadataRowOf(ctx, stack.DatabaseURL, c.typ, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if row.Metadata != c.body {
			t.Errorf("%s/%s: stored metadata\n%s\nwant the text as sent\n%s", c.typ, c.name, row.Metadata, c.body)
		}
		want, err := hashspec.Checksum([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if row.Checksum == nil || *row.Checksum != want {
			t.Errorf("%s/%s: checksum %v, want hashSpec %s", c.typ, c.name, deref(row.Checksum), want)
		}
		if saved := app.Saved[c.typ+"/"+c.name].Version; saved != want {
			t.Errorf("%s/%s: the save answered version %s, want %s", c.typ, c.name, saved, want)
		}
		if deref(row.State) != "active" || row.Version == nil || *row.Version != 1 || row.PackageID != nil {
			t.Errorf("%s/%s: state %s, version %v, package %v; want active, 1, NULL",
				c.typ, c.name, deref(row.State), row.Version, deref(row.PackageID))
		}
		if c.orgScoped != (row.OrganizationID != nil) {
			t.Errorf("%s/%s: organization_id %v, want org-scoped=%v", c.typ, c.name, deref(row.OrganizationID), c.orgScoped)
		}
	}

	// The runtime datasource: a sys_metadata row without checksum, its
	// password in sys_secret.
	ds, err := MetadataRowOf(ctx, stack.DatabaseURL, "datasource", app.Datasource)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(ds.ID) {
		t.Errorf("datasource row id %q, want a UUID", ds.ID)
	}
	if ds.Checksum != nil || deref(ds.State) != "active" || ds.Version == nil || *ds.Version != 1 || ds.OrganizationID != nil || ds.PackageID != nil {
		t.Errorf("datasource row: checksum %v, state %s, version %v, org %v, package %v; want NULL, active, 1, NULL, NULL",
			deref(ds.Checksum), deref(ds.State), ds.Version, deref(ds.OrganizationID), deref(ds.PackageID))
	}
	if strings.Contains(ds.Metadata, app.Canary) {
		t.Fatalf("the datasource row holds the password in clear: %s", ds.Metadata)
	}
	var body struct {
		Name   string `json:"name"`
		Driver string `json:"driver"`
		Origin string `json:"origin"`
		Config struct {
			Host     string `json:"host"`
			Database string `json:"database"`
			Username string `json:"username"`
		} `json:"config"`
		External struct {
			CredentialsRef string `json:"credentialsRef"`
		} `json:"external"`
	}
	if err := json.Unmarshal([]byte(ds.Metadata), &body); err != nil {
		t.Fatalf("datasource body %s: %v", ds.Metadata, err)
	}
	if body.Name != app.Datasource || body.Driver != "postgres" || body.Origin != "runtime" || body.Config.Username == "" {
		t.Errorf("datasource body %s", ds.Metadata)
	}
	ref, ok := strings.CutPrefix(body.External.CredentialsRef, "sys_secret:")
	if !ok {
		t.Fatalf("datasource credentialsRef %q, want sys_secret:<id>", body.External.CredentialsRef)
	}
	sec, err := SecretRowOf(ctx, stack.DatabaseURL, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sec.ID, "sec_") || sec.Namespace != "datasource" || sec.Key != app.Datasource ||
		sec.KMSKeyID != "local:v1" || sec.Alg != "aes-256-gcm" || sec.Version != 1 || sec.OrganizationID != nil {
		t.Errorf("sys_secret row %+v", sec)
	}
	if strings.Contains(sec.Ciphertext, app.Canary) {
		t.Fatal("sys_secret holds the password in clear")
	}
	key, err := ossecret.ParseKey(stack.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := ossecret.Decrypt(key, sec.Sealed()); err != nil || plain != app.Canary {
		t.Errorf("sys_secret decrypts to %q (%v), want the password sent", redact(plain, app.Canary), err)
	}
	other, _ := ossecret.ParseKey(randomHex(32))
	if _, err := ossecret.Decrypt(other, sec.Sealed()); !errors.Is(err, ossecret.ErrWrongKey) {
		t.Errorf("sys_secret under another key: %v, want ErrWrongKey", err)
	}

	// The node serves what it wrote: records through the data API.
	api := node.API()
	resp := api.Must(t, http.StatusCreated, "POST", "/api/v1/data/rt_project", map[string]any{"title": "P1"})
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp.Body, &created); err != nil || created.ID == "" {
		t.Fatalf("create record: %s", resp.Body)
	}
	api.Must(t, http.StatusCreated, "POST", "/api/v1/data/rt_task", map[string]any{"subject": "T1", "project": created.ID})
	if got := api.Must(t, http.StatusOK, "GET", "/api/v1/data/rt_task?limit=5", nil); !strings.Contains(string(got.Body), `"T1"`) {
		t.Errorf("rt_task records: %s", got.Body)
	}
	dss, err := api.Datasources()
	if err != nil {
		t.Fatal(err)
	}
	if d := find(dss, app.Datasource); d == nil || d.Origin != "runtime" || !d.Active {
		t.Errorf("datasources listed: %+v", dss)
	}

	// The node's own later writes: an update (field added) and a delete.
	saved := api.SaveMeta(t, "object", "rt_task", []byte(TaskBodyV2))
	row, err := MetadataRowOf(ctx, stack.DatabaseURL, "object", "rt_task")
	if err != nil {
		t.Fatal(err)
	}
	if row.Metadata != TaskBodyV2 || deref(row.Checksum) != saved.Version || row.Version == nil || *row.Version != 2 {
		t.Errorf("rt_task after the update: version %v, checksum %s (save said %s), body %s", row.Version, deref(row.Checksum), saved.Version, row.Metadata)
	}
	api.Must(t, http.StatusOK, "GET", "/api/v1/data/rt_task?limit=1&fields=id,priority", nil)
	api.DeleteMeta(t, "view", "rt_task_list")
	if rows, err := MetadataRows(ctx, stack.DatabaseURL, "view", "rt_task_list"); err != nil || len(rows) != 0 {
		t.Errorf("view rt_task_list after DELETE: %d rows (%v), want none (a real DELETE)", len(rows), err)
	}

	if strings.Contains(node.Log(), app.Canary) {
		t.Error("the node's log holds the datasource password")
	}
}

func find(dss []Datasource, name string) *Datasource {
	for i := range dss {
		if dss[i].Name == name {
			return &dss[i]
		}
	}
	return nil
}

func deref[T any](p *T) any {
	if p == nil {
		return "NULL"
	}
	return *p
}

func redact(s, secret string) string { return strings.ReplaceAll(s, secret, "<canary>") }
