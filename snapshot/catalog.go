package snapshot

import "context"

// Catalog is what the store's database shows of the tables in it: the
// replicas' nodes keep their objects' records in the same database, so
// whether an object's table and columns exist there is read here, read
// only (ObjectStack creates them only on its own save path, never for a
// row written with plain SQL).
type Catalog interface {
	// Columns returns the columns of table on the search path (exists
	// false: no such table or view).
	Columns(ctx context.Context, table string) (cols []string, exists bool, err error)
	// MetadataNamed returns every sys_metadata row of type typ called
	// name, whatever its organization, package or state, by id.
	MetadataNamed(ctx context.Context, typ, name string) ([]MetadataRow, error)
}
