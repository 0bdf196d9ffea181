package sqlite

import (
	"context"
	"database/sql"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// SyncGuard implements reconcile.GuardStore.
func (s *Store) SyncGuard(ctx context.Context, replica string, keep []snapshot.GuardRecord) ([]snapshot.GuardRecord, error) {
	var out []snapshot.GuardRecord
	err := s.writeTx(ctx, func(c *sql.Conn) error {
		have, err := sqliteSelect(ctx, c, sqSelectGuard+" WHERE replica_id = ?1", []any{replica}, scanSQLiteGuard)
		if err != nil {
			return err
		}
		want := make(map[[2]string]bool, len(keep))
		for _, r := range keep {
			want[[2]string{r.Kind, r.Key}] = true
		}
		for _, h := range have {
			if !want[[2]string{h.Kind, h.Key}] {
				if _, err := c.ExecContext(ctx, `DELETE FROM sys_reconciler_guard WHERE replica_id = ?1 AND kind = ?2 AND key = ?3`,
					replica, h.Kind, h.Key); err != nil {
					return err
				}
			}
		}
		for _, r := range keep {
			if _, err := c.ExecContext(ctx, `INSERT INTO sys_reconciler_guard (replica_id, kind, key, revision, reason, after_release, guarded_at)
VALUES (?1, ?2, ?3, ?4, ?5, (SELECT coalesce(max(id), 0) FROM sys_reconciler_guard_release), ?6)
ON CONFLICT (replica_id, kind, key) DO NOTHING`, replica, r.Kind, r.Key, r.Revision, r.Reason, r.StampedAt().UTC().Format(sqliteTime)); err != nil {
				return err
			}
		}
		out, err = sqliteSelect(ctx, c, sqSelectGuard+" WHERE replica_id = ?1 ORDER BY kind, key", []any{replica}, scanSQLiteGuard)
		return err
	})
	if err != nil {
		return nil, s.interpretError("write the pending guard", err)
	}
	return out, nil
}

const sqSelectGuard = `SELECT replica_id, kind, key, revision, reason, after_release, guarded_at FROM sys_reconciler_guard`

func scanSQLiteGuard(r *sql.Rows) (snapshot.GuardRecord, error) {
	var g snapshot.GuardRecord
	var at string
	err := r.Scan(&g.ReplicaID, &g.Kind, &g.Key, &g.Revision, &g.Reason, &g.After, &at)
	g.GuardedAt = parseSQLiteTime(at)
	return g, err
}

// LoadGuard implements reconcile.GuardStore.
func (s *Store) LoadGuard(ctx context.Context, replica string) ([]snapshot.GuardRecord, error) {
	out, err := sqliteSelect(ctx, s.db, sqSelectGuard+" WHERE replica_id = ?1 ORDER BY kind, key", []any{replica}, scanSQLiteGuard)
	return out, s.interpretError("read the pending guard", err)
}

// Guards returns every replica's pending guarded evictions.
func (s *Store) Guards(ctx context.Context) ([]snapshot.GuardRecord, error) {
	out, err := sqliteSelect(ctx, s.db, sqSelectGuard+" ORDER BY replica_id, kind, key", nil, scanSQLiteGuard)
	return out, s.interpretError("read the pending guards", err)
}

// LatestRelease implements reconcile.GuardStore.
func (s *Store) LatestRelease(ctx context.Context) (snapshot.GuardRelease, error) {
	var r snapshot.GuardRelease
	var at string
	err := s.db.QueryRowContext(ctx, `SELECT id, released_at, released_by FROM sys_reconciler_guard_release ORDER BY id DESC LIMIT 1`).
		Scan(&r.ID, &at, &r.By)
	if err == sql.ErrNoRows {
		return snapshot.GuardRelease{}, nil
	}
	r.At = parseSQLiteTime(at)
	return r, s.interpretError("read the latest guard release", err)
}

// ReleaseGuard records a release of the fleet's guarded evictions: every
// sidecar applies the evictions it guarded before it, within a poll.
func (s *Store) ReleaseGuard(ctx context.Context, by string) (snapshot.GuardRelease, error) {
	var r snapshot.GuardRelease
	var at string
	err := s.writeTx(ctx, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, `INSERT INTO sys_reconciler_guard_release (released_by) VALUES (?1) RETURNING id, released_at, released_by`, by).
			Scan(&r.ID, &at, &r.By)
	})
	r.At = parseSQLiteTime(at)
	return r, s.interpretError("release the guard", err)
}
