package postgres

import (
	"context"
	"math"
	neturl "net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/internal/testdb"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// TestMetadataDecoderMatchesScan: every row metadataDecoder decodes itself
// reads exactly as through pgx's Scan (NULLs, empty and non-ASCII text, a
// withheld body, versions a float32 holds inexactly or not at all); the
// rows it leaves to Scan are those with timestamps it does not handle.
func TestMetadataDecoderMatchesScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	p, err := newPG(url, snapshot.OpenOptions{MaxBodyBytes: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sys_metadata (id, type, name, organization_id, package_id, state, metadata, version, checksum) VALUES
  ('all-null', NULL, NULL, NULL, NULL, 'active', NULL, NULL, NULL),
  ('empty', '', '', '', '', 'active', '', 0, ''),
  ('unicode', 'obj€ct', 'nämé', 'org-ü', 'pkg-日本', 'active', '{"a":"ß"}', 2.1, 'ck'),
  ('withheld', 'object', 'big', 'o', 'p', 'active', repeat('x', 17), 1, NULL),
  ('capped-exactly', 'object', 'at-cap', NULL, NULL, 'active', repeat('y', 16), 1.1, NULL),
  ('tiny', 'object', 't', NULL, NULL, 'active', '{}', 1e-45, NULL),
  ('negzero', 'object', 'n', NULL, NULL, 'active', '{}', '-0', NULL),
  ('nan', 'object', 'nan', NULL, NULL, 'active', '{}', 'NaN', NULL),
  ('inf', 'object', 'inf', NULL, NULL, 'active', '{}', '-Infinity', NULL),
  ('ancient', 'object', 'a', NULL, NULL, 'active', '{}', 3.3, NULL),
  ('future', 'object', 'f', NULL, NULL, 'active', '{}', 3.3, NULL),
  ('unrevised', 'object', 'u', NULL, NULL, 'active', '{}', 3.3, NULL)`,
		`UPDATE sys_reconciler_revision SET updated_at = '1500-06-01 12:00:00.123456+00' WHERE key = 'ancient'`,
		`UPDATE sys_reconciler_revision SET updated_at = '2300-01-01 00:00:00.5+00' WHERE key = 'future'`,
		`DELETE FROM sys_reconciler_revision WHERE key = 'unrevised'`,
		`UPDATE sys_metadata SET updated_at = NULL WHERE id = 'unrevised'`,
	} {
		if _, err := p.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // read-only: nothing to keep
	rows, err := tx.Query(ctx, p.relistMetadata)
	if err != nil {
		t.Fatal(err)
	}
	var (
		d        metadataDecoder
		scanned  []string
		n        int
		versions = map[string]float64{}
	)
	for rows.Next() {
		n++
		if !rawMetadata(rows.FieldDescriptions()) {
			t.Fatalf("result not decodable: %+v", rows.FieldDescriptions())
		}
		var got, want snapshot.MetadataRow
		if err := scanMetadata(rows, &want); err != nil {
			t.Fatalf("scan: %v", err)
		}
		versions[want.ID] = want.Version
		if !d.decodeRaw(rows.RawValues(), &got) {
			scanned = append(scanned, want.ID)
			continue
		}
		if math.IsNaN(got.Version) && math.IsNaN(want.Version) {
			got.Version, want.Version = 0, 0 // NaN != NaN
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decoded\n%#v\nscanned\n%#v", got, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 12 {
		t.Fatalf("%d rows, want 12", n)
	}
	if want := []string{"ancient", "future"}; !slices.Equal(scanned, want) {
		t.Errorf("left to Scan: %v, want %v", scanned, want)
	}
	if versions["unicode"] != 2.1 || versions["capped-exactly"] != 1.1 {
		t.Errorf("versions %v, want 2.1 and 1.1 as written", versions)
	}
}

// TestRelistDecodesAnyExecMode: a relist reads the same rows whatever the
// query exec mode (simple protocol: every column in text format, so every
// row goes through Scan), and a row neither decoding handles fails both.
func TestRelistDecodesAnyExecMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	open := func(u string) *Store {
		p, err := newPG(u, snapshot.OpenOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	u.RawQuery = q.Encode()
	p, simple := open(url), open(u.String())
	if err := p.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, organization_id, state, metadata, version, checksum)
SELECT 'm' || g, 'object', 'o' || g, CASE WHEN g % 2 = 0 THEN 'org' END, 'active', '{"n":' || g || '}', g / 10.0, md5(g::text)
FROM generate_series(1, 300) g`); err != nil {
		t.Fatal(err)
	}
	rows, err := simple.pool.Query(ctx, p.relistMetadata)
	if err != nil {
		t.Fatal(err)
	}
	if fds := rows.FieldDescriptions(); !rows.Next() || len(fds) != len(metadataColumns) || rawMetadata(fds) {
		t.Errorf("simple protocol result %+v: want %d columns that decodeRaw leaves to Scan", fds, len(metadataColumns))
	}
	rows.Close()
	got, _, err := p.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := simple.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Metadata) != 300 || len(want.Metadata) != 300 {
		t.Fatalf("%d and %d rows, want 300", len(got.Metadata), len(want.Metadata))
	}
	for i := range got.Metadata {
		g, w := got.Metadata[i], want.Metadata[i]
		if !g.UpdatedAt.Equal(w.UpdatedAt) {
			t.Fatalf("row %d updated_at %v, simple protocol %v", i, g.UpdatedAt, w.UpdatedAt)
		}
		g.UpdatedAt = w.UpdatedAt // the same instant; text format reads it in a fixed zone
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("row %d\n%#v\nsimple protocol\n%#v", i, g, w)
		}
	}
	if _, err := p.pool.Exec(ctx, `UPDATE sys_reconciler_revision SET updated_at = 'infinity' WHERE key = 'm7'`); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{p, simple} {
		if _, _, err := s.Relist(ctx); err == nil {
			t.Errorf("relist of an infinite updated_at: no error")
		}
	}
}
