package datasource

import (
	"time"

	"github.com/objectstack-fleet/reconciler/metadata"
)

// PoolSettings is the decoded pool member. MaxConns is always set (the
// record's or Limits.DefaultMaxConns); zero durations keep the driver's
// defaults.
type PoolSettings struct {
	MaxConns          int32
	MinConns          int32
	MaxConnLifetime   time.Duration
	MaxConnIdleTime   time.Duration
	HealthCheckPeriod time.Duration
	// ConnectTimeout bounds each connection attempt; the materializer
	// lowers it to Options.ConnectTimeout.
	ConnectTimeout time.Duration
}

// The pool members: this project's names and the platform's
// (min, max, idleTimeoutMillis, connectionTimeoutMillis).
var poolKeys = []string{"maxConns", "minConns", "maxConnLifetime", "maxConnIdleTime", "healthCheckPeriod",
	"max", "min", "idleTimeoutMillis", "connectionTimeoutMillis"}

const maxMillis = 24 * 60 * 60 * 1000 // one day

func parsePool(o metadata.Body, lim Limits) (PoolSettings, error) {
	if err := o.Only(poolKeys...); err != nil {
		return PoolSettings{}, err
	}
	var p PoolSettings
	maxConns, maxKey, hasMax, err := poolInt(o, "maxConns", "max", 1)
	if err != nil {
		return PoolSettings{}, err
	}
	minConns, minKey, _, err := poolInt(o, "minConns", "min", 0)
	if err != nil {
		return PoolSettings{}, err
	}
	if hasMax && maxConns > int64(lim.MaxConns) {
		return PoolSettings{}, metadata.Faultf("pool."+maxKey, "(%d) exceeds the cap of %d connections per datasource (%s)", maxConns, lim.MaxConns, MaxConnsKey)
	}
	if minConns > int64(lim.MaxConns) {
		return PoolSettings{}, metadata.Faultf("pool."+minKey, "(%d) exceeds the cap of %d connections per datasource (%s)", minConns, lim.MaxConns, MaxConnsKey)
	}
	if !hasMax {
		maxConns = int64(max(min(lim.DefaultMaxConns, lim.MaxConns), 1))
		maxKey = "maxConns"
		if minConns > maxConns {
			return PoolSettings{}, metadata.Faultf("pool."+minKey, "(%d) exceeds the default pool size (%d); set pool.maxConns", minConns, maxConns)
		}
	}
	if minConns > maxConns {
		return PoolSettings{}, metadata.Faultf("pool."+minKey, "(%d) must not exceed pool.%s (%d)", minConns, maxKey, maxConns)
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
	if o.Has("maxConnIdleTime") && o.Has("idleTimeoutMillis") {
		return PoolSettings{}, metadata.Faultf("", "pool.maxConnIdleTime and pool.idleTimeoutMillis are exclusive")
	}
	ms, ok, err := o.Int("idleTimeoutMillis", 1, maxMillis)
	if err != nil {
		return PoolSettings{}, err
	}
	if ok {
		p.MaxConnIdleTime = time.Duration(ms) * time.Millisecond
	}
	if ms, ok, err = o.Int("connectionTimeoutMillis", 1, maxMillis); err != nil {
		return PoolSettings{}, err
	}
	if ok {
		p.ConnectTimeout = time.Duration(ms) * time.Millisecond
	}
	return p, nil
}

// poolInt reads one of two spellings of a connection count (at least lo,
// at most 2^31-1 before the cap is applied) and returns the spelling used.
func poolInt(o metadata.Body, name, alias string, lo int64) (n int64, key string, ok bool, err error) {
	if o.Has(name) && o.Has(alias) {
		return 0, "", false, metadata.Faultf("", "pool.%s and pool.%s are exclusive", name, alias)
	}
	key = name
	if o.Has(alias) {
		key = alias
	}
	n, ok, err = o.Int(key, lo, 1<<31-1)
	return n, key, ok, err
}
