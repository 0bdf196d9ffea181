package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SchemaVersion is the schema version this binary needs (the newest
// migration): every backend has the same versions.
const SchemaVersion = 9

// sourceTables are the tables whose rows are desired state, in the order
// Migrate creates the absent ones.
var sourceTables = []Table{TableMetadata, TableSecret, TableCredential}

// Schema is a backend's embedded migrations: in its root, the versioned
// files NNNN_name.sql and the one unversioned triggers.sql (the row
// triggers on the source tables, idempotent, applied by every Migrate);
// in tables/, the DDL that creates each source table in its owner's exact
// shape (applied only where the table is absent).
type Schema struct {
	kind string
	fsys fs.FS
}

// NewSchema returns the schema of the backend kind held in dir of fsys
// (a backend's embedded migrations directory; errors name its files
// kind/…). A dir that is not a valid path panics.
func NewSchema(kind string, fsys fs.FS, dir string) Schema {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("snapshot: embedded migrations %s: %v", dir, err))
	}
	return Schema{kind: kind, fsys: sub}
}

// triggersFile is the one unversioned file of a schema.
const triggersFile = "triggers.sql"

// migration is one versioned SQL file: NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func (s Schema) read(p string) (string, error) {
	b, err := fs.ReadFile(s.fsys, p)
	if err != nil {
		return "", fmt.Errorf("read embedded %s/%s: %w", s.kind, p, err)
	}
	return string(b), nil
}

// tableDDL returns the DDL that creates table in its owner's exact shape.
func (s Schema) tableDDL(table Table) (string, error) {
	return s.read("tables/" + string(table) + ".sql")
}

func (s Schema) triggersDDL() (string, error) { return s.read(triggersFile) }

func (s Schema) migrations() ([]migration, error) {
	entries, err := fs.ReadDir(s.fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations %s: %w", s.kind, err)
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
		sql, err := s.read(e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: sql})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	if len(ms) == 0 || ms[len(ms)-1].version != SchemaVersion {
		return nil, fmt.Errorf("embedded %s migrations end at the wrong version (want %d)", s.kind, SchemaVersion)
	}
	return ms, nil
}

// MigrateTx is one Migrate's write transaction, as a backend gives it to
// Schema.Migrate: the backend's own SQL for the steps whose text differs
// between databases.
type MigrateTx interface {
	// Applied creates sys_reconciler_schema when absent and returns the
	// versions recorded in it.
	Applied(ctx context.Context) ([]int, error)
	// TableExists reports whether the store finds a source table.
	TableExists(ctx context.Context, table Table) (bool, error)
	// Exec runs a script of statements without arguments.
	Exec(ctx context.Context, script string) error
	// Record records a migration as applied in sys_reconciler_schema.
	Record(ctx context.Context, version int, name string) error
	// Backfill gives a revision to every source row that has none (rows
	// written before the triggers existed, or while they were disabled)
	// and returns how many it gave one.
	Backfill(ctx context.Context) (int64, error)
}

// Migrate is the one migrate loop of every backend, run in tx: it creates
// the source tables that are absent, in their owner's exact shape, applies
// the migrations not yet recorded in sys_reconciler_schema (every one, in
// order: one numbered below the newest applied, landed later, is not
// skipped), (re)creates the row triggers on the source tables and gives
// every source row that has none a revision. It never alters a column,
// index or constraint of an existing source table.
func (s Schema) Migrate(ctx context.Context, tx MigrateTx, log *slog.Logger) error {
	ms, err := s.migrations()
	if err != nil {
		return err
	}
	applied, err := tx.Applied(ctx)
	if err != nil {
		return err
	}
	if err := s.createAbsentTables(ctx, tx, log); err != nil {
		return err
	}
	for _, m := range pending(ms, applied) {
		if err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
		if err := tx.Record(ctx, m.version, m.name); err != nil {
			return err
		}
		log.InfoContext(ctx, "applied migration", slog.Int("version", m.version), slog.String("name", m.name))
	}
	trig, err := s.triggersDDL()
	if err != nil {
		return err
	}
	if err := tx.Exec(ctx, trig); err != nil {
		return fmt.Errorf("create triggers: %w", err)
	}
	n, err := tx.Backfill(ctx)
	if err != nil {
		return fmt.Errorf("backfill revisions: %w", err)
	}
	if n > 0 {
		log.InfoContext(ctx, "gave existing rows a revision", slog.Int64("rows", n))
	}
	return nil
}

// createAbsentTables creates each source table that the store does not
// find, from its DDL.
func (s Schema) createAbsentTables(ctx context.Context, tx MigrateTx, log *slog.Logger) error {
	for _, t := range sourceTables {
		exists, err := tx.TableExists(ctx, t)
		if err != nil {
			return fmt.Errorf("look up table %s: %w", t, err)
		}
		if exists {
			log.DebugContext(ctx, "table exists: adopted as it is", slog.String("table", string(t)))
			continue
		}
		ddl, err := s.tableDDL(t)
		if err != nil {
			return err
		}
		if err := tx.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("create table %s: %w", t, err)
		}
		log.InfoContext(ctx, "created table", slog.String("table", string(t)))
	}
	return nil
}

// SourceTrigger is one row trigger that triggers.sql puts on a source
// table.
type SourceTrigger struct{ Name, Table string }

var createTriggerRE = regexp.MustCompile(`(?s)CREATE (?:OR REPLACE )?TRIGGER (\w+)\s.*?\sON (\w+)\s`)

// Triggers lists the row triggers of triggers.sql, which CheckSchema
// requires on the source tables.
func (s Schema) Triggers() ([]SourceTrigger, error) {
	ddl, err := s.triggersDDL()
	if err != nil {
		return nil, err
	}
	var out []SourceTrigger
	for _, m := range createTriggerRE.FindAllStringSubmatch(ddl, -1) {
		out = append(out, SourceTrigger{Name: m[1], Table: m[2]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("embedded %s/%s creates no trigger", s.kind, triggersFile)
	}
	return out, nil
}

// pending lists the migrations of ms not in applied, in version order
// (CheckSchema requires every one, not only the newest: Migrate applies
// one numbered below the newest applied too).
func pending(ms []migration, applied []int) []migration {
	var out []migration
	for _, m := range ms {
		if !slices.Contains(applied, m.version) {
			out = append(out, m)
		}
	}
	return out
}

// CheckVersions fails with ErrSchema when a migration is not among the
// applied versions read from the store at url (redacted).
func (s Schema) CheckVersions(url string, applied []int) error {
	ms, err := s.migrations()
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

// CheckTriggers fails with ErrSchema when triggers ("name on table") of
// Triggers are missing or disabled on the store at url (redacted).
func CheckTriggers(url string, missing []string) error {
	if len(missing) > 0 {
		return fmt.Errorf("check schema %s: %w: trigger %s missing or disabled (changes to the table go unseen): run `reconciler migrate`",
			url, ErrSchema, strings.Join(missing, ", "))
	}
	return nil
}

// fingerprint writes every file of s to h, in a fixed order.
func (s Schema) fingerprint(h interface{ Write([]byte) (int, error) }) {
	ms, _ := s.migrations()
	for _, m := range ms {
		fmt.Fprintf(h, "%s/%d/%s\n%s\n", s.kind, m.version, m.name, m.sql)
	}
	for _, t := range sourceTables {
		ddl, _ := s.tableDDL(t)
		fmt.Fprintf(h, "%s/tables/%s\n%s\n", s.kind, t, ddl)
	}
	trig, _ := s.triggersDDL()
	fmt.Fprintf(h, "%s/%s\n%s\n", s.kind, triggersFile, trig)
}

// SchemaFingerprint is a short digest of every registered backend's
// migration files, so that test templates built from an edited migration
// are not reused.
func SchemaFingerprint() string {
	h := sha256.New()
	for _, b := range backendsByKind() {
		b.Schema.fingerprint(h)
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}
