package snapshot

import "github.com/jackc/pgx/v5"

// maxChunk bounds the chunks collectRows scans into.
const maxChunk = 8192

// collectRows is pgx.CollectRows for large results: rows are scanned into
// chunks of growing size and copied once into a slice of the exact length,
// instead of into one slice copied at each growth (a relist of a million
// rows moved several times its size).
func collectRows[T any](rows pgx.Rows, fn pgx.RowToFunc[T]) ([]T, error) {
	defer rows.Close()
	var full [][]T
	n := 0
	cur := make([]T, 0, 64)
	for rows.Next() {
		if len(cur) == cap(cur) {
			full = append(full, cur)
			cur = make([]T, 0, min(2*cap(cur), maxChunk))
		}
		v, err := fn(rows)
		if err != nil {
			return nil, err
		}
		cur = append(cur, v)
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(full) == 0 {
		return cur, nil
	}
	out := make([]T, 0, n)
	for _, c := range full {
		out = append(out, c...)
	}
	return append(out, cur...), nil
}
