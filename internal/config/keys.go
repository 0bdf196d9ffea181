package config

// Key is one configuration key with its default and its documentation.
type Key struct {
	Name    string
	Default any // string, bool, int or []string
	Usage   string
}

// The keys, in the order config.yaml documents them.
const (
	KeyReplicaID        = "replica_id"
	KeyStoreURL         = "store.url"
	KeyStoreReadURL     = "store.read_url"
	KeyPollInterval     = "poll.interval"
	KeyPollJitter       = "poll.jitter"
	KeyResyncInterval   = "resync.interval"
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
	KeySQLiteDir        = "datasource.sqlite_dir"
	KeyMaxConns         = "datasource.max_conns"
	KeyMaxSpecBytes     = "connector.max_spec_bytes"
	KeyLogLevel         = "log.level"
	KeyLogFormat        = "log.format"

	KeyReplicaURL       = "replica.url"
	KeyReplicaTokenEnv  = "replica.token_env"
	KeyReplicaBusURL    = "replica.bus.url"
	KeyReplicaBusPrefix = "replica.bus.prefix"
	KeyReplicaOrigin    = "replica.origin"
)

// DefaultStoreURL is the embedded SQLite store used when none is configured.
const DefaultStoreURL = "sqlite://./demo/reconciler.db"

// DefaultStatusListen is the loopback address of the status API.
const DefaultStatusListen = "127.0.0.1:9477"

// Keys lists every configuration key with its default.
func Keys() []Key {
	return []Key{
		{KeyReplicaID, "", "replica identity in heartbeats and drift reports (default: the host name)"},
		{KeyStoreURL, DefaultStoreURL, "the shared store: sqlite://PATH or postgres://USER@HOST:PORT/DB"},
		{KeyStoreReadURL, "", "a hot standby of store.url (postgres://…) that polls and relists read; writes and the stall check stay on store.url (empty: read store.url)"},
		{KeyPollInterval, "1s", "how often the journal is polled (at least 50ms)"},
		{KeyPollJitter, "100ms", "polls come up to this much early, at random, so replicas spread out (never later than poll.interval)"},
		{KeyResyncInterval, "10m", "anti-entropy full relist interval (0 disables; otherwise at least 1s)"},
		{KeyHintListen, true, "LISTEN for change hints on PostgreSQL (only cuts latency)"},
		{KeyApplyConcurrency, 4, "materializations run at once (at least 1)"},
		{KeyApplyTimeout, "30s", "time limit of one materialization"},
		{KeyJournalRetention, "24h", "journal entries older than this are pruned (at least 1m)"},
		{KeyDriftSchedule, "@every 15m", "cron spec of drift reports (5 fields, optional seconds, or @every 15m); empty disables"},
		{KeyDriftDir, "./drift", "directory drift reports are written to"},
		{KeyStatusListen, DefaultStatusListen, "address of the status API (HOST:PORT); a non-loopback address needs status.token_env"},
		{KeyStatusTokenEnv, "", "name of the environment variable holding the status API bearer token (empty: no token)"},
		{KeyWebhookURL, "", "URL told about every pass that changed something (empty: off)"},
		{KeyWebhookSecretEnv, "", "name of the environment variable holding the webhook HMAC secret"},
		{KeyExecCommand, []string{}, "command (argv) run with the change set on stdin after every pass that changed something"},
		{KeySecretsKeyEnv, "OS_SECRET_KEY", "name of the environment variable holding the platform's secret key (64 hex characters or base64 of 32 bytes), to decrypt sys_secret rows"},
		{KeyCodeObjects, []string{}, "object names the platform defines in code: references to them resolve without a row (names beginning with sys_ always do)"},
		{KeyMaxBodyBytes, 1 << 20, "largest metadata body accepted, in bytes; a larger one is held naming this cap"},
		{KeyMaxRefs, 10000, "most distinct references one metadata item may make; more is held naming this cap"},
		{KeySQLiteDir, "", "directory SQLite datasources may open files in (empty: SQLite datasources are held)"},
		{KeyMaxConns, 50, "cap of a datasource's pool.maxConns and pool.minConns; a record above it is held naming this cap"},
		{KeyMaxSpecBytes, 8 << 20, "most bytes read of a connector's upstream answer (its OpenAPI document, a probe's answer); a larger one is held naming this cap"},
		{KeyLogLevel, "info", "debug, info, warn or error"},
		{KeyLogFormat, "text", "text or json"},
		{KeyReplicaURL, "", "HTTP base URL of the ObjectStack replica this sidecar drives through its lanes (empty: no replica driving)"},
		{KeyReplicaTokenEnv, "", "name of the environment variable holding the replica's API key or session token (sent as a bearer token)"},
		{KeyReplicaBusURL, "", "the platform's Redis bus: redis://HOST:PORT (required with replica.url)"},
		{KeyReplicaBusPrefix, "os:", "the platform's bus key prefix (lanes are PUBLISHed on <prefix>ps:<channel>)"},
		{KeyReplicaOrigin, "", "originNode of the lane messages (default: reconciler:<replica_id>)"},
	}
}

func lookupKey(name string) (Key, bool) {
	for _, k := range Keys() {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}
