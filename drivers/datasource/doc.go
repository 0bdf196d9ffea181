// Package datasource materializes sys_datasource rows into open connection
// pools (DESIGN §6): driver "postgres" through pgxpool, driver "sqlite"
// through database/sql with the pure-Go modernc.org/sqlite driver.
//
// config holds the connection settings, never the password:
//
//	postgres: {"url": "postgres://user@host:5432/db?sslmode=disable"}
//	      or  {"host": "db.internal", "port": 5432, "database": "crm",
//	           "user": "crm_app", "sslmode": "require"}
//	sqlite:   {"path": "/var/lib/app/crm.db"}
//
// The password is the credential the reconcile loop resolved
// (external.credentialsRef, or the connector named by external.connector)
// and arrives in Desired.Secret.
//
// pool tunes the pool: {"maxConns": 10, "minConns": 2,
// "maxConnLifetime": "30m", "maxConnIdleTime": "5m",
// "healthCheckPeriod": "1m"}. For sqlite, maxConns is the open-connection
// limit and minConns the number of idle connections kept.
//
// Materializing opens the pool and pings it. The outcomes: an
// authentication failure (SQLSTATE 28P01, 28000) is reconcile.Refused
// ("refused by server: password authentication failed for user "crm_app"
// (28P01)"); an unreachable server is reconcile.Transient; a bad config, an
// unknown driver or a missing database is reconcile.Invalid naming the
// fault. Reasons never contain the password.
package datasource
