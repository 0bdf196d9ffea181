package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/objectstack-fleet/reconciler/internal/hostrule"
	"github.com/objectstack-fleet/reconciler/internal/storeurl"
)

// The rules of the keys' values, and the steps that read several keys.
// Each is named by a row of the declarations (keys.go).

// checkStoreURL checks the form of store.url against the store backends
// linked in (internal/storeurl: each registers its schemes).
func checkStoreURL(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty (want %s)", storeurl.WantForms())
	}
	sc, err := storeurl.Lookup(s)
	var unknown *storeurl.UnknownError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("unknown scheme %q (want %s)", strings.ToLower(unknown.Scheme), storeurl.WantForms())
	case err != nil:
		return fmt.Errorf("not a URL (want %s)", storeurl.WantForms())
	}
	if sc.Check != nil {
		return sc.Check(s)
	}
	return nil
}

// checkStoreReadURL checks the form of store.read_url: a URL of a backend
// that takes a standby, beside a store.url of the same backend, naming
// another server. Whether it really is a standby of store.url is checked
// at start, against both servers.
func checkStoreReadURL(s, storeURL string) error {
	if s == "" {
		return nil
	}
	read, err := storeurl.Lookup(s)
	if err != nil || !read.Standby {
		return fmt.Errorf("want a %s URL of a hot standby of store.url", storeurl.WantStandby())
	}
	if read.Check != nil {
		if err := read.Check(s); err != nil {
			return err
		}
	}
	if st, err := storeurl.Lookup(storeURL); err != nil || st.Kind != read.Kind {
		kind := "such"
		if err == nil {
			kind = st.Kind
		}
		return fmt.Errorf("needs a %s %s (a %s store has no standby)", read.Names[0]+"://", KeyStoreURL, kind)
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

func checkSchedule(spec string) error {
	if spec == "" {
		return nil
	}
	if _, err := ParseSchedule(spec); err != nil {
		return fmt.Errorf("invalid cron spec %q: %v", spec, err)
	}
	return nil
}

// hostEntries checks a host policy list (connector.allow_hosts,
// connector.deny_hosts) as the connector driver reads it.
func hostEntries(entries []string) error {
	for _, e := range entries {
		if _, err := hostrule.Parse(e); err != nil {
			return fmt.Errorf("%q: %w", e, err)
		}
	}
	return nil
}

func optionalHTTPURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL")
	}
	return nil
}

func optionalRedisURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return errors.New("want a redis:// or rediss:// URL")
	}
	return nil
}

func checkBusPrefix(s string) error {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return errors.New("want a non-empty prefix without spaces (the platform's default is os:)")
	}
	return nil
}

// defaultReplicaID fills in the host name when replica_id is empty.
func defaultReplicaID(c *Config) error {
	if c.ReplicaID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "reconciler"
		}
		c.ReplicaID = h
	}
	return nil
}

// defaultReplicaOrigin fills in reconciler:<replica_id> (replica_id's own
// step, declared earlier, has run).
func defaultReplicaOrigin(c *Config) error {
	if c.ReplicaOrigin == "" {
		c.ReplicaOrigin = "reconciler:" + c.ReplicaID
	}
	return nil
}

func listenNeedsToken(c *Config) error {
	if host, _, err := net.SplitHostPort(c.StatusListen); err == nil && !LoopbackHost(host) && c.StatusTokenEnv == "" {
		return fmt.Errorf("%q is not a loopback address: the status API needs a token there (set %s)", c.StatusListen, KeyStatusTokenEnv)
	}
	return nil
}

func busNeededByReplica(c *Config) error {
	if c.ReplicaURL != "" && c.ReplicaBusURL == "" {
		return errors.New("required when replica.url is set (the platform's Redis bus, redis://HOST:PORT)")
	}
	return nil
}

// restartNeedsReplica: a restart command restarts the replica the sidecar
// drives, so it needs replica.url; an argv's first word is the program.
func restartNeedsReplica(c *Config) error {
	if len(c.RestartCommand) == 0 {
		return nil
	}
	if c.RestartCommand[0] == "" {
		return errors.New("the first word (the program) is empty")
	}
	if c.ReplicaURL == "" {
		return fmt.Errorf("needs %s (the replica it restarts)", KeyReplicaURL)
	}
	return nil
}

func lowerLogFormat(c *Config) error {
	c.LogFormat = strings.ToLower(c.LogFormat)
	return nil
}

// MaxEvictions is guard.max_evictions parsed: off, a count, or a
// percentage of a kind's entries.
type MaxEvictions struct {
	Off     bool
	Count   int     // > 0: a count
	Percent float64 // > 0: a percentage
}

// ParseMaxEvictions parses a guard.max_evictions value: "off", a count
// ("10") or a percentage ("20%", above 0 and at most 100).
func ParseMaxEvictions(s string) (MaxEvictions, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return MaxEvictions{Off: true}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f <= 0 || f > 100 {
			return MaxEvictions{}, fmt.Errorf("want a percentage above 0%% and at most 100%%, got %q", s)
		}
		return MaxEvictions{Percent: f}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return MaxEvictions{}, fmt.Errorf("want a count of at least 1, a percentage (20%%) or off, got %q", s)
	}
	return MaxEvictions{Count: n}, nil
}

func checkMaxEvictions(s string) error {
	_, err := ParseMaxEvictions(s)
	return err
}
