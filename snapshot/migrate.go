package snapshot

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql migrations/*/tables/*.sql
var migrationFS embed.FS

// sourceTables are the tables whose rows are desired state, in the order
// Migrate creates the absent ones.
var sourceTables = []Table{TableMetadata, TableSecret, TableCredential}

// tableDDL returns the embedded DDL that creates table in its owner's
// exact shape (migrations/<kind>/tables/<table>.sql). Migrate applies it
// only where the table is absent.
func tableDDL(kind string, table Table) (string, error) {
	return readEmbedded("migrations/" + kind + "/tables/" + string(table) + ".sql")
}

// triggersFile is the one unversioned file of a kind's migrations: the row
// triggers on the source tables, idempotent, applied by every Migrate.
const triggersFile = "triggers.sql"

func triggersDDL(kind string) (string, error) {
	return readEmbedded("migrations/" + kind + "/" + triggersFile)
}

// sourceTrigger is one row trigger that triggers.sql puts on a source table.
type sourceTrigger struct{ name, table string }

var createTriggerRE = regexp.MustCompile(`(?s)CREATE (?:OR REPLACE )?TRIGGER (\w+)\s.*?\sON (\w+)\s`)

// expectedTriggers lists the row triggers of triggers.sql, which
// CheckSchema requires on the source tables.
func expectedTriggers(kind string) ([]sourceTrigger, error) {
	ddl, err := triggersDDL(kind)
	if err != nil {
		return nil, err
	}
	var out []sourceTrigger
	for _, m := range createTriggerRE.FindAllStringSubmatch(ddl, -1) {
		out = append(out, sourceTrigger{name: m[1], table: m[2]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("embedded %s/%s creates no trigger", kind, triggersFile)
	}
	return out, nil
}

func readEmbedded(p string) (string, error) {
	b, err := migrationFS.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("read embedded %s: %w", p, err)
	}
	return string(b), nil
}

// migration is one embedded, versioned SQL file: NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// SchemaVersion is the schema version this binary needs (the newest
// embedded migration); both stores have the same versions.
const SchemaVersion = 9

func loadMigrations(kind string) ([]migration, error) {
	dir := "migrations/" + kind
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations %s: %w", dir, err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || e.Name() == triggersFile {
			continue
		}
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("embedded migration %s: name is not NNNN_name.sql", e.Name())
		}
		b, err := migrationFS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	if len(ms) == 0 || ms[len(ms)-1].version != SchemaVersion {
		return nil, fmt.Errorf("embedded %s migrations end at the wrong version (want %d)", kind, SchemaVersion)
	}
	return ms, nil
}

// pending lists the migrations of ms not in applied, in version order
// (CheckSchema requires every embedded one, not only the newest: Migrate
// applies one numbered below the newest applied too).
func pending(ms []migration, applied []int) []migration {
	var out []migration
	for _, m := range ms {
		if !slices.Contains(applied, m.version) {
			out = append(out, m)
		}
	}
	return out
}

// checkVersions fails with ErrSchema when an embedded migration of kind is
// not among the applied versions.
func checkVersions(kind, url string, applied []int) error {
	ms, err := loadMigrations(kind)
	if err != nil {
		return err
	}
	var missing []string
	for _, m := range pending(ms, applied) {
		missing = append(missing, strconv.Itoa(m.version))
	}
	if len(missing) > 0 {
		return fmt.Errorf("check schema %s: %w: version %s not applied, need %d: run `reconciler migrate`",
			url, ErrSchema, strings.Join(missing, ", "), SchemaVersion)
	}
	return nil
}

// SchemaFingerprint is a short digest of every embedded migration file, so
// that test templates built from an edited migration are not reused.
func SchemaFingerprint() string {
	h := sha256.New()
	for _, kind := range []string{"postgres", "sqlite"} {
		ms, _ := loadMigrations(kind)
		for _, m := range ms {
			fmt.Fprintf(h, "%s/%d/%s\n%s\n", kind, m.version, m.name, m.sql)
		}
		for _, t := range sourceTables {
			ddl, _ := tableDDL(kind, t)
			fmt.Fprintf(h, "%s/tables/%s\n%s\n", kind, t, ddl)
		}
		trig, _ := triggersDDL(kind)
		fmt.Fprintf(h, "%s/%s\n%s\n", kind, triggersFile, trig)
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}
