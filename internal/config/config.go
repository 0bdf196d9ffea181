package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cast"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// DefaultFile is the file loaded when --config is not given and it exists.
const DefaultFile = "config.yaml"

// EnvPrefix prefixes every key's environment variable.
const EnvPrefix = "RECONCILER"

// Config is a loaded, validated configuration. Each field is bound to its
// key by one row of the key declarations (keys.go).
type Config struct {
	ReplicaID      string
	StoreURL       string
	StoreReadURL   string // "" = read store.url
	PollInterval   time.Duration
	PollJitter     time.Duration
	ResyncInterval time.Duration // 0: anti-entropy relists off
	// RevalidateInterval is how often ready connectors and datasources are
	// checked again (0: off).
	RevalidateInterval time.Duration
	HintListen         bool
	ApplyConcurrency   int
	ApplyTimeout       time.Duration
	JournalRetention   time.Duration
	DriftSchedule      string // "" disables scheduled reports
	DriftDir           string
	StatusListen       string
	StatusTokenEnv     string
	WebhookURL         string
	WebhookSecretEnv   string
	ExecCommand        []string
	SecretsKeyEnv      string
	CodeObjects        []string
	MaxBodyBytes       int
	MaxRefs            int
	SQLiteDir          string
	MaxConns           int
	MaxTotalConns      int
	MaxTotalBytes      int
	AllowLocal         bool
	AllowHosts         []string
	DenyHosts          []string
	MaxSpecBytes       int
	LogLevel           slog.Level
	LogFormat          string // "text" or "json"

	ReplicaURL       string // "" = no replica driving
	ReplicaTokenEnv  string
	ReplicaBusURL    string
	ReplicaBusPrefix string
	ReplicaOrigin    string
	ReplicaRepair    string // "off" or "schema"
	ReplicaMaxProbes int

	ReplicaMode         string   // "drive" or "shadow"
	RestartCommand      []string // empty: restarts off
	RestartAfter        time.Duration
	RestartMinInterval  time.Duration
	RestartLeaseTimeout time.Duration
	GuardMaxEvictions   string // guard.max_evictions as written: see ParseMaxEvictions
	GuardWindow         time.Duration

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
	if !explicit {
		// A file found in the working directory chooses commands, hosts
		// and the variables whose values are sent as tokens: only one this
		// user owns and nobody else may write is taken without --config.
		if why := foreignFile(name); why != "" {
			return "", nil, fmt.Errorf("config file %s: not loaded without --config: %s (pass --config %s to use it)", name, why, name)
		}
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
	d := &decoder{}
	c := &Config{}
	decls := declarations()
	for _, k := range decls {
		k.decode(d, v, c)
	}
	if len(d.errs) == 0 {
		for _, k := range decls {
			for _, step := range k.steps {
				d.check(k.Name, step(c))
			}
		}
	}
	if err := errors.Join(d.errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// decoder turns raw values (YAML, environment, flags) into a key's type,
// collecting every problem.
type decoder struct {
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

func (d *decoder) str(key string, raw any) string {
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

// duration parses a Go duration ("1s", "15m").
func (d *decoder) duration(key string, raw any) time.Duration {
	if dur, ok := raw.(time.Duration); ok {
		return dur
	}
	s := d.str(key, raw)
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.fail(key, fmt.Sprintf("bad duration %q (want a number with a unit, like 1s, 500ms or 15m)", s))
		return 0
	}
	return dur
}

func (d *decoder) boolean(key string, raw any) bool {
	b, err := cast.ToBoolE(raw)
	if err != nil {
		d.fail(key, fmt.Sprintf("want true or false, got %q", fmt.Sprint(raw)))
	}
	return b
}

func (d *decoder) integer(key string, raw any) int {
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
	return n
}

func (d *decoder) level(key string, raw any) slog.Level {
	switch lvl := strings.ToLower(d.str(key, raw)); lvl {
	case "debug":
		return slog.LevelDebug
	case "info", "":
		return slog.LevelInfo
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		d.fail(key, fmt.Sprintf("unknown level %q (want debug, info, warn or error)", lvl))
		return slog.LevelInfo
	}
}

// argv reads a command: a YAML list, or a string split on white space
// (environment variables and flags).
func (d *decoder) argv(key string, raw any) []string {
	switch x := raw.(type) {
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
