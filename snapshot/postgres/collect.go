package postgres

import "github.com/jackc/pgx/v5"

// collectRows is pgx.CollectRows for large results: fn decodes each row in
// place into a slice made for n rows (the count, when the caller knows it),
// so that a relist of a million rows is neither copied out of fn's result
// nor moved as the slice grows. Rows past n are appended. batch, when not
// nil, is handed each run of every rows decoded and the last run: what it
// gets is not written again.
func collectRows[T any](rows pgx.Rows, n int, fn func(r pgx.CollectableRow, dst *T) error, every int, batch func(offset int, rows []T)) ([]T, error) {
	defer rows.Close()
	out := make([]T, 0, max(n, 0))
	var zero T
	handed := 0
	for rows.Next() {
		out = append(out, zero)
		if err := fn(rows, &out[len(out)-1]); err != nil {
			return nil, err
		}
		if batch != nil && len(out)-handed == every {
			batch(handed, out[handed:len(out):len(out)])
			handed = len(out)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if batch != nil && len(out) > handed {
		batch(handed, out[handed:len(out):len(out)])
	}
	return out, nil
}
