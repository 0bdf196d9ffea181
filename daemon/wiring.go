package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/objectstack-fleet/reconciler/drivers/connector"
	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/drivers/engine"
	"github.com/objectstack-fleet/reconciler/drivers/notify"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/ossecret"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// materializers returns the materializer of every kind that needs one
// (credential entries need none).
func materializers(cfg *config.Config, log *slog.Logger) map[registry.Kind]reconcile.Materializer {
	return map[registry.Kind]reconcile.Materializer{
		registry.KindConnector: connector.New(connector.Options{Logger: log, MaxSpecBytes: int64(cfg.MaxSpecBytes), Limits: limits(cfg)}),
		registry.KindDatasource: datasource.New(datasource.Options{Logger: log, SQLiteDir: cfg.SQLiteDir,
			MaxConns: int32(min(cfg.MaxConns, math.MaxInt32)), MaxTotalConns: cfg.MaxTotalConns}),
		registry.KindEngine: engine.New(engine.Options{Logger: log, Limits: limits(cfg)}),
	}
}

// limits are the caps of one metadata body.
func limits(cfg *config.Config) metadata.Limits {
	return metadata.Limits{MaxBodyBytes: int64(cfg.MaxBodyBytes), MaxRefs: cfg.MaxRefs}
}

// secretOpener decrypts sys_secret rows with the platform's key, read from
// the environment variable secrets.key_env names.
type secretOpener struct {
	key ossecret.Key
	env string
}

// newSecretOpener reads the key. An unset variable leaves every secret
// held (no key); a value that is not a key is a configuration error.
func (d *Daemon) newSecretOpener(cfg *config.Config) (*secretOpener, error) {
	o := &secretOpener{env: cfg.SecretsKeyEnv}
	if v := d.opts.Getenv(cfg.SecretsKeyEnv); v != "" {
		k, err := ossecret.ParseKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: environment variable %s: %w", config.KeySecretsKeyEnv, cfg.SecretsKeyEnv, err)
		}
		o.key = k
	}
	return o, nil
}

// Open decrypts one row. The error says why, never with secret bytes.
func (o *secretOpener) Open(row snapshot.SecretRow) (snapshot.Secret, error) {
	v, err := ossecret.Decrypt(o.key, ossecret.Sealed{ID: row.ID, Namespace: row.Namespace, Key: row.Key,
		KMSKeyID: row.KMSKeyID, Alg: row.Alg, Ciphertext: row.Ciphertext.Reveal()})
	var oe *ossecret.Error
	switch {
	case err == nil:
		return snapshot.NewSecret(v), nil
	case errors.Is(err, ossecret.ErrNoKey):
		return snapshot.Secret{}, fmt.Errorf("no secret key (environment variable %s is not set)", o.env)
	case errors.As(err, &oe):
		if oe.Detail != "" {
			return snapshot.Secret{}, fmt.Errorf("%v: %s", oe.Kind, oe.Detail)
		}
		return snapshot.Secret{}, oe.Kind
	}
	return snapshot.Secret{}, err
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
