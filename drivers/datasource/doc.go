// Package datasource materializes datasource records into open connection
// pools: driver "postgres" through pgxpool, driver "sqlite" through
// database/sql with the pure-Go modernc.org/sqlite driver.
//
// # Records
//
// A record is the body of a sys_metadata row of type datasource, as the
// platform stores it:
//
//	{"name": "crm", "label": "CRM", "driver": "postgres", "schemaMode": "managed",
//	 "config": {"host": "db.internal", "port": 5432, "database": "crm",
//	            "username": "crm_app", "sslmode": "require"},
//	 "pool": {"max": 10, "min": 2},
//	 "external": {"credentialsRef": "sys_secret:sec_…"},
//	 "active": true, "origin": "runtime"}
//
// config holds the connection settings, never the password:
//
//	postgres: {"url": "postgres://user@host:5432/db?sslmode=disable"}
//	      or  the fields host (required), port (a number or a numeric
//	          string), database, username (or user), sslmode (or the
//	          platform's ssl: true|false); schema, applicationName and
//	          statementTimeout (ms) set the session's search_path,
//	          application_name and statement_timeout.
//	sqlite:   {"path": "crm.db"} (or the platform's "filename")
//
// # Credentials
//
// The password is the credential the reconcile loop resolved (from
// external.credentialsRef, or the connector named by external.connector)
// and arrives in Desired.Secret. A URL carrying a password, or a parameter
// that makes the driver read a file on this host (sslrootcert, passfile,
// servicefile, …) or size the pool (pool_max_conns, …), is refused. Members
// of the record the reconciler does not use (label, schemaMode, external,
// ssl, origin, …) are ignored.
//
// # Pool settings
//
// pool tunes the pool, in this project's spelling {"maxConns": 10,
// "minConns": 2, "maxConnLifetime": "30m", "maxConnIdleTime": "5m",
// "healthCheckPeriod": "1m"} or the platform's {"max": 10, "min": 2,
// "idleTimeoutMillis": 300000, "connectionTimeoutMillis": 3000}. Without a
// size the pool holds [Options].DefaultPoolSize connections. For sqlite,
// maxConns is the open-connection limit and minConns the idle connections
// kept.
//
// # Trust
//
// A row may name its server, but it cannot exhaust the process or reach
// files. A pool size above [Options].MaxConns is refused before any socket
// opens; every connection attempt and the whole materialization are
// bounded by [Options].ConnectTimeout. A sqlite path must be a plain path
// (no file: URI, no ?parameters such as _pragma, no ".." element) naming an
// existing regular file inside [Options].SQLiteDir, also after following
// symbolic links; relative paths are taken relative to that directory. The
// file is opened read-write and never created. With no directory
// configured (the default) every sqlite file is refused.
//
// # Outcomes
//
// Materializing opens the pool and pings it, checking one connection
// before the pool opens any more. A bad record, an unknown driver, a
// refused path or a missing database is [reconcile.Invalid] naming the
// member or the fault; an authentication failure (SQLSTATE class 28) or a
// refused privilege is [reconcile.Refused] ("datasource crm: refused by
// server db.internal:5432: password authentication failed for user
// "crm_app" (SQLSTATE 28P01, invalid authorization specification)"); an
// unreachable or silent server is [reconcile.Transient]. On failure the
// returned instance is a nil interface. Reasons and logs never contain the
// password.
package datasource
