package replica

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Catalog is what the Driver reads of the database the replica's nodes
// keep their records in (the store's: snapshot.Catalog): whether an
// object's table and columns exist. ObjectStack 17.4 creates them only on
// its own save path (PUT /api/v1/meta/object/<name>, the publish routes)
// and at boot for the objects it loads then; a row written with plain SQL
// and announced through a lane is registered by every node, but nothing
// creates its table or its new fields' columns.
type Catalog interface {
	Columns(ctx context.Context, table string) (cols []string, exists bool, err error)
}

// UnservableRemedy is the remedy of an unservable object (%s: its name).
const unservableRemedy = "have the platform sync the object's storage: save it through the platform " +
	"(PUT /api/v1/meta/object/%s with its body, which creates the table and columns and leaves an unchanged body as it is), " +
	"or set replica.repair: schema to have one sidecar of the fleet do that"

// UnservableRemedy returns the remedy of unservable object name.
func UnservableRemedy(name string) string { return fmt.Sprintf(unservableRemedy, name) }

// builtinColumns are the columns the platform's SQL driver creates for
// every object itself, whatever its fields say.
var builtinColumns = []string{"id", "created_at", "updated_at"}

// tableOf is the table of object name, as the platform's
// StorageNameMapping.resolveTableName derives it: the name, or what
// follows a legacy "<namespace>__" prefix.
func tableOf(name string) string {
	if i := strings.Index(name, "__"); i >= 0 {
		return name[i+2:]
	}
	return name
}

// storedFields returns the fields of an object body (the row, as the
// replica reads it) that have a column: every field but formula fields,
// which the platform computes on read, and the built-in columns.
func storedFields(body map[string]any) []string {
	fields, _ := body["fields"].(map[string]any)
	var out []string
	for name, f := range fields {
		if slices.Contains(builtinColumns, name) {
			continue
		}
		if m, ok := f.(map[string]any); ok && m["type"] == "formula" {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// externalDatasource reports whether the object keeps its records outside
// the nodes' database (a datasource other than the default one), where
// the catalog cannot look.
func externalDatasource(body map[string]any) bool {
	ds, _ := body["datasource"].(string)
	return ds != "" && ds != "default"
}

// missingStorage says what of object name's storage (overlay: its row as
// the replica reads it) is missing from the catalog: "" when its table
// and every stored field's column exist, or when it cannot be told (an
// external datasource).
func missingStorage(ctx context.Context, cat Catalog, name string, overlay map[string]any) (string, error) {
	if externalDatasource(overlay) {
		return "", nil
	}
	table := tableOf(name)
	cols, exists, err := cat.Columns(ctx, table)
	if err != nil {
		return "", fmt.Errorf("read the catalog of table %s: %w", table, err)
	}
	if !exists {
		return fmt.Sprintf("object %s has no table: the replica registered it, but its data API cannot read or write records (table %s is missing)", name, table), nil
	}
	var missing []string
	for _, f := range storedFields(overlay) {
		if !slices.Contains(cols, f) {
			missing = append(missing, f)
		}
	}
	switch len(missing) {
	case 0:
		return "", nil
	case 1:
		return fmt.Sprintf("field %s of object %s has no column in table %s: the replica answers 400 Unknown field to every write naming it", missing[0], name, table), nil
	}
	return fmt.Sprintf("fields %s of object %s have no column in table %s: the replica answers 400 Unknown field to every write naming them",
		strings.Join(missing, ", "), name, table), nil
}
