package daemon

import (
	"context"
	"log/slog"
	"time"
)

// journalPruner deletes old journal entries.
type journalPruner interface {
	Prune(ctx context.Context, retention time.Duration) (int64, error)
}

// pruner deletes journal entries older than journal.retention from time
// to time; the store makes sure one replica at a time does the work.
type pruner struct {
	store     journalPruner
	retention time.Duration
	log       *slog.Logger
}

// pruneEvery is how often to prune: a tenth of the retention, between a
// minute and an hour.
func (p pruner) every() time.Duration {
	return min(max(p.retention/10, time.Minute), time.Hour)
}

func (p pruner) run(ctx context.Context) error {
	t := time.NewTicker(p.every())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := p.store.Prune(ctx, p.retention)
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.WarnContext(ctx, "journal prune failed", slog.String("error", err.Error()))
		case n > 0:
			p.log.InfoContext(ctx, "journal pruned", slog.Int64("entries", n), slog.Duration("retention", p.retention))
		}
	}
}
