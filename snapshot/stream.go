package snapshot

import "context"

// Streamer is a store whose relist hands metadata rows over while it reads
// them (PostgreSQL does; SQLite's relist reads a local file at once): a
// caller parses each batch while the next arrives, so that a cold start's
// parsing overlaps its reading.
type Streamer interface {
	// RelistStream is Relist, calling batch with each run of metadata
	// rows as soon as it is read: rows are Rows.Metadata[offset :
	// offset+len(rows)] of the result, in order, on the reading
	// goroutine (batch must return quickly). The rows are not changed
	// afterwards and may be read from any goroutine; if RelistStream
	// returns an error, what batch was given means nothing.
	RelistStream(ctx context.Context, batch func(offset int, rows []MetadataRow)) (Rows, Cursor, error)
}
