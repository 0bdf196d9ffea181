package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cast"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// DefaultFile is the file loaded when --config is not given and it exists.
const DefaultFile = "config.yaml"

// EnvPrefix prefixes every key's environment variable.
const EnvPrefix = "RECONCILER"

// Config is a loaded, validated configuration. Each field's key tag names
// its key (Changed compares by it).
type Config struct {
	ReplicaID        string        `key:"replica_id"`
	StoreURL         string        `key:"store.url"`
	StoreReadURL     string        `key:"store.read_url"` // "" = read store.url
	PollInterval     time.Duration `key:"poll.interval"`
	PollJitter       time.Duration `key:"poll.jitter"`
	ResyncInterval   time.Duration `key:"resync.interval"` // 0: anti-entropy relists off
	HintListen       bool          `key:"hint.listen"`
	ApplyConcurrency int           `key:"apply.concurrency"`
	ApplyTimeout     time.Duration `key:"apply.timeout"`
	JournalRetention time.Duration `key:"journal.retention"`
	DriftSchedule    string        `key:"drift.schedule"` // "" disables scheduled reports
	DriftDir         string        `key:"drift.dir"`
	StatusListen     string        `key:"status.listen"`
	StatusTokenEnv   string        `key:"status.token_env"`
	WebhookURL       string        `key:"notify.webhook.url"`
	WebhookSecretEnv string        `key:"notify.webhook.secret_env"`
	ExecCommand      []string      `key:"notify.exec.command"`
	SecretsKeyEnv    string        `key:"secrets.key_env"`
	CodeObjects      []string      `key:"engine.code_objects"`
	MaxBodyBytes     int           `key:"engine.max_body_bytes"`
	MaxRefs          int           `key:"engine.max_refs"`
	SQLiteDir        string        `key:"datasource.sqlite_dir"`
	MaxConns         int           `key:"datasource.max_conns"`
	MaxSpecBytes     int           `key:"connector.max_spec_bytes"`
	LogLevel         slog.Level    `key:"log.level"`
	LogFormat        string        `key:"log.format"` // "text" or "json"

	ReplicaURL       string `key:"replica.url"` // "" = no replica driving
	ReplicaTokenEnv  string `key:"replica.token_env"`
	ReplicaBusURL    string `key:"replica.bus.url"`
	ReplicaBusPrefix string `key:"replica.bus.prefix"`
	ReplicaOrigin    string `key:"replica.origin"`

	// File is the file the configuration was read from ("" for none).
	File string
}

// Source says where Load reads from.
type Source struct {
	// File is the --config value: "" loads ./config.yaml when it exists.
	File string
	// Flags holds flags added by AddFlags (nil: none). Only flags the user
	// set override the other sources.
	Flags *pflag.FlagSet
}

// Error is a validation problem with one key.
type Error struct {
	Key     string
	Problem string
}

func (e *Error) Error() string { return e.Key + ": " + e.Problem }

// cronParser parses drift.schedule: standard 5-field specs, an optional
// leading seconds field, and descriptors such as @hourly or @every 15m.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a drift.schedule spec.
func ParseSchedule(spec string) (cron.Schedule, error) { return cronParser.Parse(spec) }

// Load reads, merges and validates the configuration.
func Load(src Source) (*Config, error) {
	file, data, err := readFile(src.File)
	if err != nil {
		return nil, err
	}
	return load(file, data, src.Flags)
}

// Parse merges YAML file contents (named file in errors) with the defaults,
// the environment and flags, and validates the result.
func Parse(file string, data []byte, flags *pflag.FlagSet) (*Config, error) {
	return load(file, data, flags)
}

func readFile(name string) (string, []byte, error) {
	explicit := name != ""
	if !explicit {
		name = DefaultFile
	}
	data, err := os.ReadFile(name)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("config file %s: %w", name, unwrapPathError(err))
	}
	return name, data, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func load(file string, data []byte, flags *pflag.FlagSet) (*Config, error) {
	v := viper.New()
	for _, k := range Keys() {
		v.SetDefault(k.Name, k.Default)
		// Bind explicitly so that every key is read from its variable even
		// when no other source mentions it.
		_ = v.BindEnv(k.Name, EnvName(k.Name))
	}
	if file != "" {
		if err := checkFileKeys(file, data); err != nil {
			return nil, err
		}
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
	}
	if flags != nil {
		for _, k := range Keys() {
			if f := flags.Lookup(k.Name); f != nil {
				if err := v.BindPFlag(k.Name, f); err != nil {
					return nil, fmt.Errorf("bind flag --%s: %w", k.Name, err)
				}
			}
		}
	}
	c, err := decode(v)
	if err != nil {
		if file != "" {
			return nil, fmt.Errorf("config (file %s): %w", file, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	c.File = file
	return c, nil
}

// EnvName returns the environment variable of key: RECONCILER_POLL_INTERVAL.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// checkFileKeys rejects keys the daemon does not know, so that a typo does
// not silently fall back to a default.
func checkFileKeys(file string, data []byte) error {
	fv := viper.New()
	fv.SetConfigType("yaml")
	if err := fv.ReadConfig(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	var unknown []string
	for _, k := range fv.AllKeys() {
		if _, ok := lookupKey(k); ok {
			continue
		}
		if fv.Get(k) == nil && isPrefix(k) {
			continue // an empty section such as "notify:"
		}
		unknown = append(unknown, k)
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("config file %s: unknown key %s", file, strings.Join(quoteAll(unknown), ", "))
}

func isPrefix(k string) bool {
	for _, key := range Keys() {
		if strings.HasPrefix(key.Name, k+".") {
			return true
		}
	}
	return false
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// decode reads every key from v and validates it; all problems are joined.
func decode(v *viper.Viper) (*Config, error) {
	d := decoder{v: v}
	c := &Config{
		ReplicaID:        d.str(KeyReplicaID),
		StoreURL:         d.str(KeyStoreURL),
		StoreReadURL:     d.str(KeyStoreReadURL),
		PollInterval:     d.duration(KeyPollInterval, MinPollInterval),
		PollJitter:       d.duration(KeyPollJitter, 0),
		ResyncInterval:   d.duration(KeyResyncInterval, 0),
		HintListen:       d.boolean(KeyHintListen),
		ApplyConcurrency: d.integer(KeyApplyConcurrency, 1),
		ApplyTimeout:     d.duration(KeyApplyTimeout, 1),
		JournalRetention: d.duration(KeyJournalRetention, MinJournalRetention),
		DriftSchedule:    strings.TrimSpace(d.str(KeyDriftSchedule)),
		DriftDir:         d.str(KeyDriftDir),
		StatusListen:     d.str(KeyStatusListen),
		StatusTokenEnv:   d.str(KeyStatusTokenEnv),
		WebhookURL:       d.str(KeyWebhookURL),
		WebhookSecretEnv: d.str(KeyWebhookSecretEnv),
		ExecCommand:      d.argv(KeyExecCommand),
		SecretsKeyEnv:    d.str(KeySecretsKeyEnv),
		CodeObjects:      d.argv(KeyCodeObjects),
		MaxBodyBytes:     d.integer(KeyMaxBodyBytes, 1024),
		MaxRefs:          d.integer(KeyMaxRefs, 1),
		SQLiteDir:        d.str(KeySQLiteDir),
		MaxConns:         d.integer(KeyMaxConns, 1),
		MaxSpecBytes:     d.integer(KeyMaxSpecBytes, 1024),
		LogFormat:        strings.ToLower(d.str(KeyLogFormat)),
		ReplicaURL:       d.str(KeyReplicaURL),
		ReplicaTokenEnv:  d.str(KeyReplicaTokenEnv),
		ReplicaBusURL:    d.str(KeyReplicaBusURL),
		ReplicaBusPrefix: d.str(KeyReplicaBusPrefix),
		ReplicaOrigin:    d.str(KeyReplicaOrigin),
	}
	if c.ReplicaID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "reconciler"
		}
		c.ReplicaID = h
	}
	if c.ResyncInterval > 0 && c.ResyncInterval < MinResyncInterval {
		d.fail(KeyResyncInterval, fmt.Sprintf("must be 0 (off) or at least %s (each resync relists the whole store), got %s", MinResyncInterval, c.ResyncInterval))
	}
	d.check(KeyStoreURL, checkStoreURL(c.StoreURL))
	d.check(KeyStoreReadURL, checkStoreReadURL(c.StoreReadURL, c.StoreURL))
	if c.DriftSchedule != "" {
		if _, err := ParseSchedule(c.DriftSchedule); err != nil {
			d.fail(KeyDriftSchedule, fmt.Sprintf("invalid cron spec %q: %v", c.DriftSchedule, err))
		}
	}
	if c.DriftDir == "" {
		d.fail(KeyDriftDir, "must not be empty")
	}
	d.check(KeyStatusListen, checkListen(c.StatusListen))
	if host, _, err := net.SplitHostPort(c.StatusListen); err == nil && !LoopbackHost(host) && c.StatusTokenEnv == "" {
		d.fail(KeyStatusListen, fmt.Sprintf("%q is not a loopback address: the status API needs a token there (set %s)", c.StatusListen, KeyStatusTokenEnv))
	}
	d.check(KeyStatusTokenEnv, checkEnvName(c.StatusTokenEnv))
	d.check(KeyWebhookSecretEnv, checkEnvName(c.WebhookSecretEnv))
	d.check(KeySecretsKeyEnv, checkEnvName(c.SecretsKeyEnv))
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.fail(KeyWebhookURL, "want an http:// or https:// URL")
		}
	}
	d.checkReplica(c)
	lvl := strings.ToLower(d.str(KeyLogLevel))
	switch lvl {
	case "debug":
		c.LogLevel = slog.LevelDebug
	case "info", "":
		c.LogLevel = slog.LevelInfo
	case "warn", "warning":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		d.fail(KeyLogLevel, fmt.Sprintf("unknown level %q (want debug, info, warn or error)", lvl))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		d.fail(KeyLogFormat, fmt.Sprintf("unknown format %q (want text or json)", c.LogFormat))
	}
	if err := errors.Join(d.errs...); err != nil {
		return nil, err
	}
	return c, nil
}

type decoder struct {
	v    *viper.Viper
	errs []error
}

func (d *decoder) fail(key, problem string) {
	d.errs = append(d.errs, &Error{Key: key, Problem: problem})
}

func (d *decoder) check(key string, err error) {
	if err != nil {
		d.fail(key, err.Error())
	}
}

func (d *decoder) str(key string) string {
	raw := d.v.Get(key)
	switch raw.(type) {
	case map[string]any, []any:
		d.fail(key, "want a single value, not a list or section")
		return ""
	}
	s, err := cast.ToStringE(raw)
	if err != nil {
		d.fail(key, fmt.Sprintf("want a string, got %T", raw))
	}
	return strings.TrimSpace(s)
}

// Floors of the intervals that, set tiny, would keep a core busy.
const (
	// MinPollInterval is the shortest poll.interval: every poll is a
	// query, and a heartbeat is written every five polls.
	MinPollInterval = 50 * time.Millisecond
	// MinResyncInterval is the shortest resync.interval other than 0.
	MinResyncInterval = time.Second
	// MinJournalRetention is the shortest journal.retention: pruning
	// entries younger than a few polls would expire the replicas' cursors
	// and make every one of them relist the whole store, again and again.
	MinJournalRetention = time.Minute
)

// duration parses a Go duration ("1s", "15m"); min is 0 (may be zero), 1
// (must be positive) or a floor.
func (d *decoder) duration(key string, min time.Duration) time.Duration {
	raw := d.v.Get(key)
	if dur, ok := raw.(time.Duration); ok {
		return d.durationRange(key, dur, min)
	}
	s := d.str(key)
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.fail(key, fmt.Sprintf("bad duration %q (want a number with a unit, like 1s, 500ms or 15m)", s))
		return 0
	}
	return d.durationRange(key, dur, min)
}

func (d *decoder) durationRange(key string, dur, min time.Duration) time.Duration {
	switch {
	case dur < 0:
		d.fail(key, fmt.Sprintf("must not be negative, got %s", dur))
	case dur < min && min == 1:
		d.fail(key, "must be greater than zero")
	case dur < min:
		d.fail(key, fmt.Sprintf("must be at least %s (a shorter one keeps a core busy), got %s", min, dur))
	}
	return dur
}

func (d *decoder) boolean(key string) bool {
	raw := d.v.Get(key)
	b, err := cast.ToBoolE(raw)
	if err != nil {
		d.fail(key, fmt.Sprintf("want true or false, got %q", fmt.Sprint(raw)))
	}
	return b
}

func (d *decoder) integer(key string, min int) int {
	raw := d.v.Get(key)
	var n int
	var err error
	switch x := raw.(type) {
	case float64:
		if x != float64(int(x)) {
			err = errors.New("not an integer")
		}
		n = int(x)
	case bool:
		err = errors.New("boolean")
	default:
		n, err = cast.ToIntE(strings.TrimSpace(fmt.Sprint(raw)))
	}
	if err != nil {
		d.fail(key, fmt.Sprintf("want an integer, got %q", fmt.Sprint(raw)))
		return 0
	}
	if n < min {
		d.fail(key, fmt.Sprintf("must be at least %d, got %d", min, n))
	}
	return n
}

// argv reads a command: a YAML list, or a string split on white space
// (environment variables and flags).
func (d *decoder) argv(key string) []string {
	switch x := d.v.Get(key).(type) {
	case nil:
		return nil
	case []string:
		return nonEmpty(x)
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case string, int, int64, float64, bool:
				out = append(out, fmt.Sprint(e))
			default:
				d.fail(key, "want a list of strings")
				return nil
			}
		}
		return nonEmpty(out)
	case string:
		return strings.Fields(x)
	default:
		d.fail(key, fmt.Sprintf("want a list of strings, got %T", x))
		return nil
	}
}

func nonEmpty(ss []string) []string {
	out := ss[:0:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func checkStoreURL(s string) error {
	if s == "" {
		return errors.New("must not be empty (want sqlite://PATH or postgres://…)")
	}
	i := strings.Index(s, "://")
	if i <= 0 {
		return errors.New("not a URL (want sqlite://PATH or postgres://…)")
	}
	switch scheme := strings.ToLower(s[:i]); scheme {
	case "sqlite":
		if _, err := snapshot.SQLitePath(s); err != nil {
			return errors.New("want sqlite://rel/path.db or sqlite:///abs/path.db (no query)")
		}
	case "postgres", "postgresql":
		if _, err := url.Parse(s); err != nil {
			return fmt.Errorf("malformed postgres URL %q", RedactURL(s))
		}
	default:
		return fmt.Errorf("unknown scheme %q (want sqlite or postgres)", scheme)
	}
	return nil
}

// checkStoreReadURL checks the form of store.read_url: a PostgreSQL URL
// beside a PostgreSQL store.url, naming another server. Whether it really
// is a standby of store.url is checked at start, against both servers.
func checkStoreReadURL(s, storeURL string) error {
	if s == "" {
		return nil
	}
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || (!strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql")) {
		return errors.New("want a postgres:// URL of a hot standby of store.url")
	}
	if _, err := url.Parse(s); err != nil {
		return fmt.Errorf("malformed postgres URL %q", RedactURL(s))
	}
	if st, _, _ := strings.Cut(storeURL, "://"); !strings.EqualFold(st, "postgres") && !strings.EqualFold(st, "postgresql") {
		return fmt.Errorf("needs a postgres:// %s (a SQLite store has no standby)", KeyStoreURL)
	}
	if s == storeURL {
		return fmt.Errorf("names the same server as %s: want a hot standby of it (or leave it empty)", KeyStoreURL)
	}
	return nil
}

// LoopbackHost reports whether a listen host binds loopback only:
// "localhost" or a loopback IP. An empty host binds every interface.
func LoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func checkListen(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want HOST:PORT, got %q", s)
	}
	if port == "" {
		return fmt.Errorf("want HOST:PORT, got %q", s)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// checkReplica validates the replica.* keys and fills in the origin.
func (d *decoder) checkReplica(c *Config) {
	if c.ReplicaOrigin == "" {
		c.ReplicaOrigin = "reconciler:" + c.ReplicaID
	}
	d.check(KeyReplicaTokenEnv, checkEnvName(c.ReplicaTokenEnv))
	if c.ReplicaBusPrefix == "" || strings.ContainsAny(c.ReplicaBusPrefix, " \t\r\n") {
		d.fail(KeyReplicaBusPrefix, "want a non-empty prefix without spaces (the platform's default is os:)")
	}
	if c.ReplicaURL != "" {
		u, err := url.Parse(c.ReplicaURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.fail(KeyReplicaURL, "want an http:// or https:// URL")
		}
		if c.ReplicaBusURL == "" {
			d.fail(KeyReplicaBusURL, "required when replica.url is set (the platform's Redis bus, redis://HOST:PORT)")
		}
	}
	if c.ReplicaBusURL != "" {
		u, err := url.Parse(c.ReplicaBusURL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			d.fail(KeyReplicaBusURL, "want a redis:// or rediss:// URL")
		}
	}
}

func checkEnvName(s string) error {
	if s == "" {
		return nil
	}
	for i, r := range s {
		ok := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("%q is not an environment variable name", s)
		}
	}
	return nil
}

// RedactURL hides the secrets of a URL for logs and errors.
func RedactURL(s string) string { return redact.URL(s) }
