package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/objectstack-fleet/reconciler/drivers/connector"
	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/drivers/engine"
	"github.com/objectstack-fleet/reconciler/drivers/notify"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/ossecret"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// materializers returns the materializer of every kind that needs one
// (credential entries need none).
func materializers(cfg *config.Config, log *slog.Logger) (map[registry.Kind]reconcile.Materializer, error) {
	hosts, err := connector.ParseHostPolicy(hostPolicy(cfg))
	if err != nil {
		return nil, err
	}
	return map[registry.Kind]reconcile.Materializer{
		registry.KindConnector: connector.New(connector.Options{Logger: log, MaxSpecBytes: int64(cfg.MaxSpecBytes), Limits: limits(cfg), Hosts: hosts}),
		registry.KindDatasource: datasource.New(datasource.Options{Logger: log, SQLiteDir: cfg.SQLiteDir,
			MaxConns: int32(min(cfg.MaxConns, math.MaxInt32)), MaxTotalConns: cfg.MaxTotalConns, AllowLocal: cfg.AllowLocal}),
		registry.KindEngine: engine.New(engine.Options{Logger: log, Limits: limits(cfg)}),
	}, nil
}

// hostPolicy is connector.allow_hosts and connector.deny_hosts, the deny
// list with what is always denied: link-local addresses (the cloud
// metadata address among them), this daemon's status address, and the
// store's and the bus's host:port. Loopback and private addresses stay
// allowed (the demo's upstream is on 127.0.0.1).
func hostPolicy(cfg *config.Config) connector.HostPolicy {
	deny := append(slices.Clone(connector.DefaultDenyHosts), cfg.DenyHosts...)
	if host, port, err := net.SplitHostPort(cfg.StatusListen); err == nil && port != "0" {
		deny = append(deny, net.JoinHostPort(host, port))
		if ip := net.ParseIP(host); host == "localhost" || host == "" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
			deny = append(deny, net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port))
		}
	}
	for _, raw := range []string{cfg.StoreURL, cfg.StoreReadURL, cfg.ReplicaBusURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		switch {
		case port != "":
		case u.Scheme == "redis" || u.Scheme == "rediss":
			port = "6379"
		case u.Scheme == "postgres" || u.Scheme == "postgresql":
			port = "5432"
		default:
			continue
		}
		for _, h := range strings.Split(u.Hostname(), ",") {
			deny = append(deny, net.JoinHostPort(h, port))
		}
	}
	return connector.HostPolicy{Allow: cfg.AllowHosts, Deny: deny}
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
func (o *secretOpener) Open(row snapshot.SecretRow) (secret.Secret, error) {
	v, err := ossecret.Decrypt(o.key, ossecret.Sealed{ID: row.ID, Namespace: row.Namespace, Key: row.Key,
		KMSKeyID: row.KMSKeyID, Alg: row.Alg, Ciphertext: row.Ciphertext.Reveal()})
	var oe *ossecret.Error
	switch {
	case err == nil:
		return secret.New(v), nil
	case errors.Is(err, ossecret.ErrNoKey):
		return secret.Secret{}, fmt.Errorf("no secret key (environment variable %s is not set)", o.env)
	case errors.As(err, &oe):
		if oe.Detail != "" {
			return secret.Secret{}, fmt.Errorf("%v: %s", oe.Kind, oe.Detail)
		}
		return secret.Secret{}, oe.Kind
	}
	return secret.Secret{}, err
}

// notifyTarget is a notify driver: told by the loop, run by the daemon.
// The webhook, the exec command and the replica driver are each one.
type notifyTarget interface {
	reconcile.Notifier
	Run(ctx context.Context) error
}

// notifyTargets are the targets the loop tells, in order; each queues and
// never blocks.
type notifyTargets []notifyTarget

func (ts notifyTargets) Notify(cs reconcile.ChangeSet) {
	for _, t := range ts {
		t.Notify(cs)
	}
}

// notifier is the loop's Notifier: nil when there is no target.
func (ts notifyTargets) notifier() reconcile.Notifier {
	if len(ts) == 0 {
		return nil
	}
	return ts
}

// notifyTargets builds the notify targets configured by key (the webhook,
// the exec command); build adds the replica driver.
func (d *Daemon) notifyTargets(cfg *config.Config) (notifyTargets, error) {
	var targets notifyTargets
	if cfg.WebhookURL != "" {
		sig, err := d.envValue(config.KeyWebhookSecretEnv, cfg.WebhookSecretEnv)
		if err != nil {
			return nil, err
		}
		targets = append(targets, notify.NewWebhook(notify.WebhookOptions{URL: cfg.WebhookURL, Secret: sig, Logger: d.log}))
	}
	if len(cfg.ExecCommand) > 0 {
		targets = append(targets, notify.NewExec(notify.ExecOptions{Command: cfg.ExecCommand, Logger: d.log}))
	}
	return targets, nil
}

// guardOptions configure the eviction guard; the store keeps its pending
// evictions per replica id and carries the fleet's releases.
func guardOptions(cfg *config.Config, store snapshot.Store) reconcile.GuardOptions {
	lim, _ := config.ParseMaxEvictions(cfg.GuardMaxEvictions) // validated at load
	return reconcile.GuardOptions{Off: lim.Off, Max: lim.Count, Percent: lim.Percent, Window: cfg.GuardWindow, Store: store}
}
