package daemon

import (
	"context"
	"log/slog"

	"github.com/objectstack-fleet/reconciler/drivers/connector"
	"github.com/objectstack-fleet/reconciler/drivers/engine"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// materializers returns the materializer of every kind that needs one.
func materializers(log *slog.Logger) map[registry.Kind]reconcile.Materializer {
	return map[registry.Kind]reconcile.Materializer{
		registry.KindConnector: connector.New(connector.Options{Logger: log}),
		registry.KindEngine:    engine.New(engine.Options{Logger: log}),
	}
}

// notifier builds the configured notify targets and the Run functions
// that drive them; nil when none is configured.
func (d *Daemon) notifier(cfg *config.Config) (reconcile.Notifier, []func(context.Context) error, error) {
	return nil, nil, nil
}
