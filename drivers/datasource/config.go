package datasource

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/internal/jsonobj"
)

// The drivers.
const (
	DriverPostgres = "postgres"
	DriverSQLite   = "sqlite"
)

// PoolSettings is the decoded pool column; zero fields keep the driver's
// defaults.
type PoolSettings struct {
	MaxConns          int32
	MinConns          int32
	MaxConnLifetime   time.Duration
	MaxConnIdleTime   time.Duration
	HealthCheckPeriod time.Duration
}

// Config is a decoded datasource row.
type Config struct {
	Driver string
	// ConnString is the postgres connection URL, without a password.
	ConnString string
	// Path is the sqlite database file.
	Path string
	Pool PoolSettings
}

// parseConfig validates a row's driver, config and pool columns. Faults
// wrap jsonobj.ErrBody and name the member ("config.host is required").
func parseConfig(driver string, config, pool []byte) (Config, error) {
	c := Config{Driver: driver}
	if len(config) == 0 {
		config = []byte("{}")
	}
	if len(pool) == 0 {
		pool = []byte("{}")
	}
	cfg, err := jsonobj.Decode(config, "config")
	if err != nil {
		return Config{}, err
	}
	switch driver {
	case DriverPostgres:
		if c.ConnString, err = postgresURL(cfg); err != nil {
			return Config{}, err
		}
	case DriverSQLite:
		if err := cfg.Only("path"); err != nil {
			return Config{}, err
		}
		if c.Path, err = cfg.Required("path"); err != nil {
			return Config{}, err
		}
	default:
		return Config{}, jsonobj.Faultf("unknown driver %q (want postgres or sqlite)", driver)
	}
	if c.Pool, err = parsePool(pool); err != nil {
		return Config{}, err
	}
	return c, nil
}

var sslmodes = map[string]bool{"disable": true, "allow": true, "prefer": true, "require": true, "verify-ca": true, "verify-full": true}

// postgresURL builds the connection URL from config.url or the fields.
func postgresURL(cfg jsonobj.Object) (string, error) {
	if err := cfg.Only("url", "host", "port", "database", "user", "sslmode"); err != nil {
		return "", err
	}
	raw, hasURL, err := cfg.String("url")
	if err != nil {
		return "", err
	}
	if hasURL {
		for _, k := range []string{"host", "port", "database", "user", "sslmode"} {
			if cfg.Has(k) {
				return "", jsonobj.Faultf("config.url and config.%s are exclusive", k)
			}
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return "", jsonobj.Faultf("config.url must be a postgres:// URL")
		}
		if _, ok := u.User.Password(); ok {
			return "", jsonobj.Faultf("config.url must not hold a password (it comes from the credential)")
		}
		if q := u.Query(); q.Has("password") {
			return "", jsonobj.Faultf("config.url must not hold a password (it comes from the credential)")
		}
		return raw, nil
	}
	host, err := cfg.Required("host")
	if err != nil {
		return "", err
	}
	port, hasPort, err := cfg.Int("port", 1, 65535)
	if err != nil {
		return "", err
	}
	db, _, err := cfg.String("database")
	if err != nil {
		return "", err
	}
	user, _, err := cfg.String("user")
	if err != nil {
		return "", err
	}
	sslmode, hasSSL, err := cfg.String("sslmode")
	if err != nil {
		return "", err
	}
	if hasSSL && !sslmodes[sslmode] {
		return "", jsonobj.Faultf("config.sslmode %q is not one of disable, allow, prefer, require, verify-ca, verify-full", sslmode)
	}
	u := url.URL{Scheme: "postgres", Host: host, Path: "/" + db}
	if hasPort {
		u.Host = host + ":" + strconv.FormatInt(port, 10)
		if isIPv6(host) {
			u.Host = "[" + host + "]:" + strconv.FormatInt(port, 10)
		}
	}
	if user != "" {
		u.User = url.User(user)
	}
	if hasSSL {
		u.RawQuery = url.Values{"sslmode": {sslmode}}.Encode()
	}
	return u.String(), nil
}

func isIPv6(h string) bool {
	for i := 0; i < len(h); i++ {
		if h[i] == ':' {
			return true
		}
	}
	return false
}

func parsePool(b []byte) (PoolSettings, error) {
	o, err := jsonobj.Decode(b, "pool")
	if err != nil {
		return PoolSettings{}, err
	}
	if err := o.Only("maxConns", "minConns", "maxConnLifetime", "maxConnIdleTime", "healthCheckPeriod"); err != nil {
		return PoolSettings{}, err
	}
	var p PoolSettings
	maxConns, hasMax, err := o.Int("maxConns", 1, 10000)
	if err != nil {
		return PoolSettings{}, err
	}
	minConns, _, err := o.Int("minConns", 0, 10000)
	if err != nil {
		return PoolSettings{}, err
	}
	if hasMax && minConns > maxConns {
		return PoolSettings{}, jsonobj.Faultf("pool.minConns (%d) must not exceed pool.maxConns (%d)", minConns, maxConns)
	}
	p.MaxConns, p.MinConns = int32(maxConns), int32(minConns)
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"maxConnLifetime", &p.MaxConnLifetime}, {"maxConnIdleTime", &p.MaxConnIdleTime}, {"healthCheckPeriod", &p.HealthCheckPeriod}} {
		if *d.dst, _, err = o.Duration(d.key); err != nil {
			return PoolSettings{}, err
		}
	}
	return p, nil
}

// rowFields is the JSON form of a datasource row in Desired.Body.
type rowFields struct {
	Driver   string          `json:"driver"`
	Config   json.RawMessage `json:"config"`
	Pool     json.RawMessage `json:"pool"`
	External json.RawMessage `json:"external"`
	Active   *bool           `json:"active"`
}

func decodeRow(body []byte) (rowFields, error) {
	var r rowFields
	if err := json.Unmarshal(body, &r); err != nil {
		return rowFields{}, fmt.Errorf("datasource body: %w", jsonobj.Faultf("datasource body is not a valid row: %v", err))
	}
	return r, nil
}
