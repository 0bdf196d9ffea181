package config

import (
	"fmt"
	"log/slog"
	"time"
)

// The keys' names, in the order config.yaml documents them. A name is
// declared here once and bound to its Config field, default, rule and
// documentation by one row of [declarations].
const (
	KeyReplicaID        = "replica_id"
	KeyStoreURL         = "store.url"
	KeyStoreReadURL     = "store.read_url"
	KeyPollInterval     = "poll.interval"
	KeyPollJitter       = "poll.jitter"
	KeyResyncInterval   = "resync.interval"
	KeyRevalidate       = "revalidate.interval"
	KeyHintListen       = "hint.listen"
	KeyApplyConcurrency = "apply.concurrency"
	KeyApplyTimeout     = "apply.timeout"
	KeyJournalRetention = "journal.retention"
	KeyDriftSchedule    = "drift.schedule"
	KeyDriftDir         = "drift.dir"
	KeyStatusListen     = "status.listen"
	KeyStatusTokenEnv   = "status.token_env"
	KeyWebhookURL       = "notify.webhook.url"
	KeyWebhookSecretEnv = "notify.webhook.secret_env"
	KeyExecCommand      = "notify.exec.command"
	KeySecretsKeyEnv    = "secrets.key_env"
	KeyCodeObjects      = "engine.code_objects"
	KeyMaxBodyBytes     = "engine.max_body_bytes"
	KeyMaxRefs          = "engine.max_refs"
	KeyMaxTotalBytes    = "engine.max_total_bytes"
	KeySQLiteDir        = "datasource.sqlite_dir"
	KeyMaxConns         = "datasource.max_conns"
	KeyMaxTotalConns    = "datasource.max_total_conns"
	KeyAllowLocal       = "datasource.allow_local"
	KeyAllowHosts       = "connector.allow_hosts"
	KeyDenyHosts        = "connector.deny_hosts"
	KeyMaxSpecBytes     = "connector.max_spec_bytes"
	KeyLogLevel         = "log.level"
	KeyLogFormat        = "log.format"

	KeyReplicaURL       = "replica.url"
	KeyReplicaTokenEnv  = "replica.token_env"
	KeyReplicaBusURL    = "replica.bus.url"
	KeyReplicaBusPrefix = "replica.bus.prefix"
	KeyReplicaOrigin    = "replica.origin"
	KeyReplicaRepair    = "replica.repair"
	KeyReplicaMaxProbes = "replica.max_probes_per_second"

	KeyReplicaMode         = "replica.mode"
	KeyRestartCommand      = "replica.restart.command"
	KeyRestartAfter        = "replica.restart.after"
	KeyRestartMinInterval  = "replica.restart.min_interval"
	KeyRestartLeaseTimeout = "replica.restart.lease_timeout"
	KeyGuardMaxEvictions   = "guard.max_evictions"
	KeyGuardWindow         = "guard.window"
)

// DefaultStoreURL is the embedded SQLite store used when none is configured.
const DefaultStoreURL = "sqlite://./demo/reconciler.db"

// DefaultStatusListen is the loopback address of the status API.
const DefaultStatusListen = "127.0.0.1:9477"

// Floors of the intervals that, set tiny, would keep a core busy.
const (
	// MinPollInterval is the shortest poll.interval: every poll is a
	// query, and a heartbeat is written every five polls.
	MinPollInterval = 50 * time.Millisecond
	// MinResyncInterval is the shortest resync.interval other than 0.
	MinResyncInterval = time.Second
	// MinRestartDuration is the shortest of the replica.restart.*
	// durations: a restart takes seconds, a shorter bound means nothing.
	MinRestartDuration = time.Second
	// MinJournalRetention is the shortest journal.retention: pruning
	// entries younger than a few polls would expire the replicas' cursors
	// and make every one of them relist the whole store, again and again.
	MinJournalRetention = time.Minute
)

// declarations is the one list of keys: each row names the key, binds its
// Config field (whose Go type picks the decoding: string, bool, int,
// time.Duration, []string, slog.Level), gives its default and its usage
// line, and the rules its value must meet. Flags, environment variables,
// decoding, validation, [Changed] and the documentation test all come from
// it. A rule that needs other keys' values is a [decl.then] step; steps run
// after every key is decoded, in this order.
func declarations() []decl {
	return []decl{
		bind(KeyReplicaID, "", "replica identity in heartbeats and drift reports (default: the host name)",
			func(c *Config) *string { return &c.ReplicaID }).then(defaultReplicaID),
		bind(KeyStoreURL, DefaultStoreURL, "the shared store: sqlite://PATH or postgres://USER@HOST:PORT/DB",
			func(c *Config) *string { return &c.StoreURL }, checkStoreURL),
		bind(KeyStoreReadURL, "", "a hot standby of store.url (postgres://…) that polls and relists read; writes and the stall check stay on store.url (empty: read store.url)",
			func(c *Config) *string { return &c.StoreReadURL }).then(func(c *Config) error { return checkStoreReadURL(c.StoreReadURL, c.StoreURL) }),
		bind(KeyPollInterval, "1s", "how often the journal is polled (at least 50ms)",
			func(c *Config) *time.Duration { return &c.PollInterval }, atLeast(MinPollInterval)),
		bind(KeyPollJitter, "100ms", "polls come up to this much early, at random, so replicas spread out (never later than poll.interval)",
			func(c *Config) *time.Duration { return &c.PollJitter }, atLeast(0)),
		bind(KeyResyncInterval, "10m", "anti-entropy full relist interval (0 disables; otherwise at least 1s)",
			func(c *Config) *time.Duration { return &c.ResyncInterval }, atLeast(0), offOrAtLeast(MinResyncInterval, "each resync relists the whole store")),
		bind(KeyRevalidate, "10m", "how often ready connectors are probed again and ready datasources pinged (jittered by at most 10%; 0 disables; otherwise at least 1s)",
			func(c *Config) *time.Duration { return &c.RevalidateInterval }, atLeast(0), offOrAtLeast(MinResyncInterval, "each round probes every ready connector and datasource")),
		bind(KeyHintListen, true, "LISTEN for change hints on PostgreSQL (only cuts latency)",
			func(c *Config) *bool { return &c.HintListen }),
		bind(KeyApplyConcurrency, 4, "materializations run at once (at least 1)",
			func(c *Config) *int { return &c.ApplyConcurrency }, minInt(1)),
		bind(KeyApplyTimeout, "30s", "time limit of one materialization",
			func(c *Config) *time.Duration { return &c.ApplyTimeout }, positive),
		bind(KeyJournalRetention, "24h", "journal entries older than this are pruned (at least 1m)",
			func(c *Config) *time.Duration { return &c.JournalRetention }, atLeast(MinJournalRetention)),
		bind(KeyDriftSchedule, "@every 15m", "cron spec of drift reports (5 fields, optional seconds, or @every 15m); empty disables",
			func(c *Config) *string { return &c.DriftSchedule }, checkSchedule),
		bind(KeyDriftDir, "./drift", "directory drift reports are written to",
			func(c *Config) *string { return &c.DriftDir }, notEmpty),
		bind(KeyStatusListen, DefaultStatusListen, "address of the status API (HOST:PORT); a non-loopback address needs status.token_env",
			func(c *Config) *string { return &c.StatusListen }, checkListen).then(listenNeedsToken),
		bind(KeyStatusTokenEnv, "", "name of the environment variable holding the status API bearer token (empty: no token)",
			func(c *Config) *string { return &c.StatusTokenEnv }, checkEnvName),
		bind(KeyWebhookURL, "", "URL told about every pass that changed something (empty: off)",
			func(c *Config) *string { return &c.WebhookURL }, optionalHTTPURL),
		bind(KeyWebhookSecretEnv, "", "name of the environment variable holding the webhook HMAC secret",
			func(c *Config) *string { return &c.WebhookSecretEnv }, checkEnvName),
		bind(KeyExecCommand, []string{}, "command (argv) run with the change set on stdin after every pass that changed something",
			func(c *Config) *[]string { return &c.ExecCommand }),
		bind(KeySecretsKeyEnv, "OS_SECRET_KEY", "name of the environment variable holding the platform's secret key (64 hex characters or base64 of 32 bytes), to decrypt sys_secret rows",
			func(c *Config) *string { return &c.SecretsKeyEnv }, checkEnvName),
		bind(KeyCodeObjects, []string{}, "object names the platform defines in code: references to them resolve without a row (names beginning with sys_ always do)",
			func(c *Config) *[]string { return &c.CodeObjects }),
		bind(KeyMaxBodyBytes, 1<<20, "largest metadata body accepted, in bytes; a larger one is held naming this cap",
			func(c *Config) *int { return &c.MaxBodyBytes }, minInt(1024)),
		bind(KeyMaxRefs, 10000, "most distinct references one metadata item may make; more is held naming this cap",
			func(c *Config) *int { return &c.MaxRefs }, minInt(1)),
		bind(KeyMaxTotalBytes, 64<<20, "most bytes of metadata bodies one read of the store holds at once (at least engine.max_body_bytes); the rest are read at the next polls",
			func(c *Config) *int { return &c.MaxTotalBytes }, minInt(1024)).then(func(c *Config) error {
			if c.MaxTotalBytes < c.MaxBodyBytes {
				return fmt.Errorf("must be at least %s (%d), got %d", KeyMaxBodyBytes, c.MaxBodyBytes, c.MaxTotalBytes)
			}
			return nil
		}),
		bind(KeySQLiteDir, "", "directory SQLite datasources may open files in (empty: SQLite datasources are held)",
			func(c *Config) *string { return &c.SQLiteDir }),
		bind(KeyMaxConns, 50, "cap of a datasource's pool.maxConns and pool.minConns; a record above it is held naming this cap",
			func(c *Config) *int { return &c.MaxConns }, minInt(1)),
		bind(KeyMaxTotalConns, 16, "open connections all datasource pools of this sidecar share: a pool's min shrinks to fit; a datasource that gets none is held naming this budget",
			func(c *Config) *int { return &c.MaxTotalConns }, minInt(1)),
		bind(KeyAllowLocal, false, "let datasource rows reach local servers: a Unix socket as host, or a URL without a host (the driver's local defaults)",
			func(c *Config) *bool { return &c.AllowLocal }),
		bind(KeyAllowHosts, []string{}, "upstreams connector rows may name (host, host:port or CIDR); empty: any not denied",
			func(c *Config) *[]string { return &c.AllowHosts }, hostEntries),
		bind(KeyDenyHosts, []string{}, "upstreams connector rows may not name (host, host:port or CIDR), besides link-local addresses, the status address and the store's and bus's host:port, always denied",
			func(c *Config) *[]string { return &c.DenyHosts }, hostEntries),
		bind(KeyMaxSpecBytes, 8<<20, "most bytes read of a connector's upstream answer (its OpenAPI document, a probe's answer); a larger one is held naming this cap",
			func(c *Config) *int { return &c.MaxSpecBytes }, minInt(1024)),
		bind(KeyLogLevel, "info", "debug, info, warn or error",
			func(c *Config) *slog.Level { return &c.LogLevel }),
		bind(KeyLogFormat, "text", "text or json",
			func(c *Config) *string { return &c.LogFormat }, oneOf("format", "text", "json")).then(lowerLogFormat),
		bind(KeyReplicaURL, "", "HTTP base URL of the ObjectStack replica this sidecar drives through its lanes (empty: no replica driving)",
			func(c *Config) *string { return &c.ReplicaURL }, optionalHTTPURL),
		bind(KeyReplicaTokenEnv, "", "name of the environment variable holding the replica's API key or session token (sent as a bearer token)",
			func(c *Config) *string { return &c.ReplicaTokenEnv }, checkEnvName),
		bind(KeyReplicaBusURL, "", "the platform's Redis bus: redis://HOST:PORT (required with replica.url)",
			func(c *Config) *string { return &c.ReplicaBusURL }, optionalRedisURL).then(busNeededByReplica),
		bind(KeyReplicaBusPrefix, "os:", "the platform's bus key prefix (lanes are PUBLISHed on <prefix>ps:<channel>)",
			func(c *Config) *string { return &c.ReplicaBusPrefix }, checkBusPrefix),
		bind(KeyReplicaOrigin, "", "originNode of the lane messages (default: reconciler:<replica_id>)",
			func(c *Config) *string { return &c.ReplicaOrigin }).then(defaultReplicaOrigin),
		bind(KeyReplicaRepair, "off", "off, or schema: one sidecar of the fleet at a time has the platform sync the storage (table, columns) of an object its replica registered but cannot serve, through the platform's own save route",
			func(c *Config) *string { return &c.ReplicaRepair }, oneOf("repair", "off", "schema")),
		bind(KeyReplicaMaxProbes, 20, "most read-only probes of the replica per second, for the whole sidecar",
			func(c *Config) *int { return &c.ReplicaMaxProbes }, minInt(1)),
		bind(KeyReplicaMode, "drive", "drive (publish lane messages until the replica serves each change) or shadow (probe and report only, publish nothing: entries show replica state would-publish; for adopting beside a live fleet)",
			func(c *Config) *string { return &c.ReplicaMode }, oneOf("mode", "drive", "shadow")),
		bind(KeyRestartCommand, []string{}, "command (argv, no shell, a minimal environment) that restarts the replica when it holds stale entries no lane can update; one replica of the fleet at a time (empty: restarts off, stale entries name the remedy)",
			func(c *Config) *[]string { return &c.RestartCommand }).then(restartNeedsReplica),
		bind(KeyRestartAfter, "5m", "how long the replica holds stale entries before it is restarted (at least 1s)",
			func(c *Config) *time.Duration { return &c.RestartAfter }, atLeastFor(MinRestartDuration)),
		bind(KeyRestartMinInterval, "30m", "shortest time between two restarts of this replica (at least 1s)",
			func(c *Config) *time.Duration { return &c.RestartMinInterval }, atLeastFor(MinRestartDuration)),
		bind(KeyRestartLeaseTimeout, "10m", "bound of one restart: the fleet's restart lease expires this long after it was taken, whether the replica healed or its sidecar died (at least 1s)",
			func(c *Config) *time.Duration { return &c.RestartLeaseTimeout }, atLeastFor(MinRestartDuration)),
		bind(KeyGuardMaxEvictions, "20%", "evictions of one kind allowed within guard.window: a count (10), a percentage of the kind's entries (20%, never fewer than 10) or off; more are guarded: the entries keep serving until their rows come back or `reconciler guard release`",
			func(c *Config) *string { return &c.GuardMaxEvictions }, checkMaxEvictions),
		bind(KeyGuardWindow, "60s", "sliding window the eviction guard counts evictions over, so that a mass deletion spread over several polls counts as one (at least 1s)",
			func(c *Config) *time.Duration { return &c.GuardWindow }, atLeast(time.Second)),
	}
}
