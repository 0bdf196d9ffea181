package datasource

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/objectstack-fleet/reconciler/metadata"
)

// PostgresConfig is a postgres datasource's connection settings. It never
// holds a password: that is the credential the reconcile loop resolved.
type PostgresConfig struct {
	// ConnString is a postgres:// URL (config.url) or a keyword/value
	// string built from the fields; either way without a password.
	ConnString string
	// RuntimeParams are session settings from config.schema
	// (search_path), config.applicationName (application_name) and
	// config.statementTimeout (statement_timeout, milliseconds).
	RuntimeParams map[string]string
}

var sslmodes = map[string]bool{"disable": true, "allow": true, "prefer": true, "require": true, "verify-ca": true, "verify-full": true}

// fieldKeys are the discrete connection fields config.url excludes.
var fieldKeys = []string{"host", "port", "database", "username", "user", "sslmode", "ssl"}

// urlParamRefusals are query parameters a row's URL may not carry, with the
// reason. The file parameters make the driver read files on the
// reconciler's host; the pool parameters would bypass the pool caps.
var urlParamRefusals = map[string]string{
	"password":            "config.url must not carry a password; use external.credentialsRef",
	"sslpassword":         "config.url must not carry a password; use external.credentialsRef",
	"passfile":            "config.url must not carry passfile (a file on the reconciler's host)",
	"service":             "config.url must not carry service (read from a file on the reconciler's host)",
	"servicefile":         "config.url must not carry servicefile (a file on the reconciler's host)",
	"sslcert":             "config.url must not carry sslcert (a file on the reconciler's host)",
	"sslkey":              "config.url must not carry sslkey (a file on the reconciler's host)",
	"sslrootcert":         "config.url must not carry sslrootcert (a file on the reconciler's host)",
	"pool_max_conns":      "config.url must not carry pool_max_conns; use pool.maxConns",
	"pool_min_conns":      "config.url must not carry pool_min_conns; use pool.minConns",
	"pool_min_idle_conns": "config.url must not carry pool_min_idle_conns; use pool.minConns",
}

func parsePostgres(cfg metadata.Body) (*PostgresConfig, error) {
	if cfg.Has("password") {
		return nil, metadata.Faultf("config.password", "must not be set; use external.credentialsRef")
	}
	// autoMigrate is the platform's schema self-heal switch; the reconciler
	// runs no DDL and ignores it.
	if err := cfg.Only(append([]string{"url", "schema", "applicationName", "statementTimeout", "autoMigrate"}, fieldKeys...)...); err != nil {
		return nil, err
	}
	pc := &PostgresConfig{}
	raw, hasURL, err := cfg.String("url")
	if err != nil {
		return nil, err
	}
	if hasURL {
		for _, k := range fieldKeys {
			if cfg.Has(k) {
				return nil, metadata.Faultf("", "config.url and config.%s are exclusive", k)
			}
		}
		if pc.ConnString, err = checkURL(raw); err != nil {
			return nil, err
		}
	} else if pc.ConnString, err = fieldsConnString(cfg); err != nil {
		return nil, err
	}
	if pc.RuntimeParams, err = runtimeParams(cfg); err != nil {
		return nil, err
	}
	return pc, nil
}

// checkURL accepts a postgres:// URL without a password or refused
// parameter. The URL is not echoed in faults: it is the writer's text.
func checkURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Opaque != "" {
		return "", metadata.Faultf("config.url", "must be a postgres:// URL")
	}
	if _, ok := u.User.Password(); ok {
		return "", metadata.Faultf("config.url", "must not carry a password; use external.credentialsRef")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", metadata.Faultf("config.url", "has a malformed query string")
	}
	for k := range q {
		if msg, bad := urlParamRefusals[strings.ToLower(k)]; bad {
			return "", metadata.Faultf("", "%s", msg)
		}
	}
	return raw, nil
}

// fieldsConnString builds a keyword/value connection string from the
// discrete fields, quoting each value, so that any host (a name, an IPv6
// address, a socket directory) survives.
func fieldsConnString(cfg metadata.Body) (string, error) {
	host, err := cfg.Required("host")
	if err != nil {
		return "", err
	}
	kv := [][2]string{{"host", host}}
	port, err := portOf(cfg)
	if err != nil {
		return "", err
	}
	if port != "" {
		kv = append(kv, [2]string{"port", port})
	}
	db, hasDB, err := cfg.String("database")
	if err != nil {
		return "", err
	}
	if hasDB {
		kv = append(kv, [2]string{"dbname", db})
	}
	if cfg.Has("username") && cfg.Has("user") {
		return "", metadata.Faultf("", "config.username and config.user are exclusive")
	}
	userKey := "username"
	if cfg.Has("user") {
		userKey = "user"
	}
	user, hasUser, err := cfg.String(userKey)
	if err != nil {
		return "", err
	}
	if hasUser {
		kv = append(kv, [2]string{"user", user})
	}
	sslmode, hasSSL, err := cfg.String("sslmode")
	if err != nil {
		return "", err
	}
	if hasSSL && !sslmodes[sslmode] {
		return "", metadata.Faultf("config.sslmode", "%q is not one of disable, allow, prefer, require, verify-ca, verify-full", sslmode)
	}
	ssl, hasToggle, err := cfg.Bool("ssl")
	if err != nil {
		return "", err
	}
	switch {
	case hasSSL && hasToggle:
		return "", metadata.Faultf("", "config.sslmode and config.ssl are exclusive")
	case hasToggle && ssl:
		sslmode, hasSSL = "require", true
	case hasToggle:
		sslmode, hasSSL = "disable", true
	}
	if hasSSL {
		kv = append(kv, [2]string{"sslmode", sslmode})
	}
	var b strings.Builder
	for i, p := range kv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p[0])
		b.WriteString("='")
		b.WriteString(strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(p[1]))
		b.WriteByte('\'')
	}
	return b.String(), nil
}

// portOf reads config.port: a number or a numeric string, 1 to 65535.
func portOf(cfg metadata.Body) (string, error) {
	if !cfg.Has("port") {
		return "", nil
	}
	n, _, err := cfg.Int("port", 1, 65535)
	if err == nil {
		return strconv.FormatInt(n, 10), nil
	}
	s, _, serr := cfg.String("port")
	if serr != nil {
		return "", err
	}
	n, perr := strconv.ParseInt(s, 10, 32)
	if perr != nil || n < 1 || n > 65535 {
		return "", metadata.Faultf("config.port", "must be an integer between 1 and 65535")
	}
	return strconv.FormatInt(n, 10), nil
}

// runtimeParams reads the platform's session settings.
func runtimeParams(cfg metadata.Body) (map[string]string, error) {
	params := map[string]string{}
	schema, ok, err := cfg.String("schema")
	if err != nil {
		return nil, err
	}
	if ok {
		params["search_path"] = schema
	}
	app, ok, err := cfg.String("applicationName")
	if err != nil {
		return nil, err
	}
	if ok {
		params["application_name"] = app
	}
	ms, ok, err := cfg.Int("statementTimeout", 1, 1<<31-1)
	if err != nil {
		return nil, err
	}
	if ok {
		params["statement_timeout"] = strconv.FormatInt(ms, 10)
	}
	return params, nil
}

// AllowLocalKey is the config key that lets datasource rows reach local
// servers (Unix sockets, a URL without a host).
const AllowLocalKey = "datasource.allow_local"

// errLocal is the cause of a datasource refused for a local target.
var errLocal = errors.New("local datasource target refused")

// localTarget says why a connection would not be a plain TCP one (a Unix
// socket, or a URL without a host, which the driver fills with its local
// defaults: the default socket, the daemon's OS user), or "".
func localTarget(connString string, pc *pgxpool.Config) string {
	if u, err := url.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") &&
		u.Host == "" && u.Query().Get("host") == "" {
		return "config.url has no host"
	}
	hosts := []string{pc.ConnConfig.Host}
	for _, f := range pc.ConnConfig.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.HasPrefix(h, "/") || strings.HasPrefix(h, "@") {
			return "the host is a Unix socket"
		}
	}
	return ""
}
