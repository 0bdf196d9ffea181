package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// pgSyncGuard makes a replica's rows exactly the keys of $2/$3 (parallel
// arrays of kinds and keys): rows already there keep their release stamp.
const pgSyncGuard = `WITH keep AS (
  SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::timestamptz[]) AS k(kind, key, revision, reason, guarded_at)
), gone AS (
  DELETE FROM sys_reconciler_guard g WHERE g.replica_id = $1
    AND NOT EXISTS (SELECT 1 FROM keep WHERE keep.kind = g.kind AND keep.key = g.key)
)
INSERT INTO sys_reconciler_guard (replica_id, kind, key, revision, reason, after_release, guarded_at)
SELECT $1, kind, key, revision, reason, (SELECT coalesce(max(id), 0) FROM sys_reconciler_guard_release), guarded_at FROM keep
ON CONFLICT (replica_id, kind, key) DO NOTHING`

const pgSelectGuard = `SELECT replica_id, kind, key, revision, reason, after_release, guarded_at FROM sys_reconciler_guard`

// SyncGuard implements reconcile.GuardStore.
func (p *Store) SyncGuard(ctx context.Context, replica string, keep []snapshot.GuardRecord) ([]snapshot.GuardRecord, error) {
	kinds, keys, revs, reasons, ats := make([]string, len(keep)), make([]string, len(keep)), make([]int64, len(keep)),
		make([]string, len(keep)), make([]time.Time, len(keep))
	for i, r := range keep {
		kinds[i], keys[i], revs[i], reasons[i], ats[i] = r.Kind, r.Key, r.Revision, r.Reason, r.StampedAt()
	}
	var out []snapshot.GuardRecord
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pgSyncGuard, replica, kinds, keys, revs, reasons, ats); err != nil {
			return err
		}
		var err error
		out, err = p.guardRows(ctx, tx, pgSelectGuard+" WHERE replica_id = $1 ORDER BY kind, key", replica)
		return err
	})
	if err != nil {
		return nil, p.interpretError("write the pending guard", err)
	}
	return out, nil
}

// LoadGuard implements reconcile.GuardStore.
func (p *Store) LoadGuard(ctx context.Context, replica string) ([]snapshot.GuardRecord, error) {
	out, err := p.guardRows(ctx, p.pool, pgSelectGuard+" WHERE replica_id = $1 ORDER BY kind, key", replica)
	return out, p.interpretError("read the pending guard", err)
}

// Guards returns every replica's pending guarded evictions.
func (p *Store) Guards(ctx context.Context) ([]snapshot.GuardRecord, error) {
	out, err := p.guardRows(ctx, p.pool, pgSelectGuard+" ORDER BY replica_id, kind, key")
	return out, p.interpretError("read the pending guards", err)
}

func (p *Store) guardRows(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, query string, args ...any) ([]snapshot.GuardRecord, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (snapshot.GuardRecord, error) {
		var g snapshot.GuardRecord
		err := r.Scan(&g.ReplicaID, &g.Kind, &g.Key, &g.Revision, &g.Reason, &g.After, &g.GuardedAt)
		return g, err
	})
}

// LatestRelease implements reconcile.GuardStore.
func (p *Store) LatestRelease(ctx context.Context) (snapshot.GuardRelease, error) {
	var r snapshot.GuardRelease
	err := p.pool.QueryRow(ctx, `SELECT id, released_at, released_by FROM sys_reconciler_guard_release ORDER BY id DESC LIMIT 1`).
		Scan(&r.ID, &r.At, &r.By)
	if err == pgx.ErrNoRows {
		return snapshot.GuardRelease{}, nil
	}
	return r, p.interpretError("read the latest guard release", err)
}

// ReleaseGuard records a release of the fleet's guarded evictions: every
// sidecar applies the evictions it guarded before it, within a poll.
func (p *Store) ReleaseGuard(ctx context.Context, by string) (snapshot.GuardRelease, error) {
	var r snapshot.GuardRelease
	err := p.pool.QueryRow(ctx, `INSERT INTO sys_reconciler_guard_release (released_by) VALUES ($1) RETURNING id, released_at, released_by`, by).
		Scan(&r.ID, &r.At, &r.By)
	return r, p.interpretError("release the guard", err)
}
