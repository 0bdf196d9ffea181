package datasource

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteDSNNeverCreates: the name handed to the driver opens an
// existing file only, so a file removed after the checks is not created
// again; odd characters in the path stay part of the path.
func TestSQLiteDSNNeverCreates(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"gone.db", "a b%41#c.db"} {
		path := filepath.Join(dir, name)
		db, err := sql.Open("sqlite", sqliteDSN(path))
		if err != nil {
			t.Fatal(err)
		}
		err = db.Ping()
		db.Close()
		if err == nil {
			t.Fatalf("%s: opened a missing file", name)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("%s: files created: %v", name, ents)
		}
		// An existing file of that name opens.
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err = sql.Open("sqlite", sqliteDSN(path))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE t (x int)"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		db.Close()
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("%s: files: %v", name, ents)
		}
		os.Remove(path)
	}
}
