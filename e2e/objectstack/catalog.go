//go:build objectstack

package objectstack

import (
	"context"
	"fmt"
	"sort"
)

// Catalog returns, one line each, the columns (type, nullability,
// default), indexes and constraints of every table of the public schema
// whose name is in tables (nil: all), sorted: what "the platform's tables
// unchanged" means. Triggers are left out: the reconciler adds its own.
func Catalog(ctx context.Context, dbURL string, tables map[string]bool) ([]string, error) {
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	const q = `
SELECT 'column ' || c.table_name || '.' || c.column_name || ' ' || c.data_type || ' ' || c.udt_name
       || ' null=' || c.is_nullable || ' default=' || coalesce(c.column_default, '-') || ' pos=' || c.ordinal_position, c.table_name
  FROM information_schema.columns c WHERE c.table_schema = 'public'
UNION ALL
SELECT 'index ' || i.tablename || ' ' || i.indexdef, i.tablename FROM pg_indexes i WHERE i.schemaname = 'public'
UNION ALL
SELECT 'constraint ' || r.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid), r.relname::text
  FROM pg_constraint k JOIN pg_class r ON r.oid = k.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
 WHERE n.nspname = 'public'`
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line, table string
		if err := rows.Scan(&line, &table); err != nil {
			return nil, err
		}
		if tables == nil || tables[table] {
			out = append(out, line)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// Tables returns the names of the tables of the public schema.
func Tables(ctx context.Context, dbURL string) (map[string]bool, error) {
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out[name] = true
	}
	return out, rows.Err()
}

// Diff returns the lines of a missing from b and of b missing from a.
func Diff(a, b []string) (onlyA, onlyB []string) {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			m[x] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for _, x := range a {
		if !mb[x] {
			onlyA = append(onlyA, x)
		}
	}
	for _, x := range b {
		if !ma[x] {
			onlyB = append(onlyB, x)
		}
	}
	return onlyA, onlyB
}
