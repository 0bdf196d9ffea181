package daemon

import (
	"context"
	"log/slog"

	"github.com/objectstack-fleet/reconciler/drivers/connector"
	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/drivers/engine"
	"github.com/objectstack-fleet/reconciler/drivers/notify"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// materializers returns the materializer of every kind that needs one
// (credential entries need none).
func materializers(log *slog.Logger) map[registry.Kind]reconcile.Materializer {
	return map[registry.Kind]reconcile.Materializer{
		registry.KindConnector:  connector.New(connector.Options{Logger: log}),
		registry.KindDatasource: datasource.New(datasource.Options{Logger: log}),
		registry.KindEngine:     engine.New(engine.Options{Logger: log}),
	}
}

// notifyTarget is a notify driver: told by the loop, run by the daemon.
type notifyTarget interface {
	reconcile.Notifier
	Run(ctx context.Context) error
}

// notifier builds the configured notify targets: the Notifier to hand to
// the loop (nil when none) and their Run functions.
func (d *Daemon) notifier(cfg *config.Config) (reconcile.Notifier, []func(context.Context) error, error) {
	var targets []notifyTarget
	if cfg.WebhookURL != "" {
		secret, err := d.envValue(config.KeyWebhookSecretEnv, cfg.WebhookSecretEnv)
		if err != nil {
			return nil, nil, err
		}
		targets = append(targets, notify.NewWebhook(notify.WebhookOptions{URL: cfg.WebhookURL, Secret: secret, Logger: d.log}))
	}
	if len(cfg.ExecCommand) > 0 {
		targets = append(targets, notify.NewExec(notify.ExecOptions{Command: cfg.ExecCommand, Logger: d.log}))
	}
	runs := make([]func(context.Context) error, len(targets))
	for i, t := range targets {
		runs[i] = t.Run
	}
	switch len(targets) {
	case 0:
		return nil, nil, nil
	case 1:
		return targets[0], runs, nil
	default:
		return fanOut(targets), runs, nil
	}
}

// fanOut tells every target; each queues and never blocks.
type fanOut []notifyTarget

func (f fanOut) Notify(cs reconcile.ChangeSet) {
	for _, t := range f {
		t.Notify(cs)
	}
}
