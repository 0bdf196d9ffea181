package connector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/hostrule"
)

// The config keys of the host policy, named by reasons.
const (
	AllowHostsKey = "connector.allow_hosts"
	DenyHostsKey  = "connector.deny_hosts"
)

// ErrHostRefused is the cause of a connector whose upstream the host
// policy refuses.
var ErrHostRefused = errors.New("upstream host refused by the host policy")

// HostPolicy says which upstreams connector rows may name. An entry is a
// host name or IP address (any port), host:port ([v6]:port), or a CIDR
// prefix. Deny wins; with Allow set, only what it names is allowed. Names
// are matched against the URL's host, addresses against every address
// dialed (so a name resolving to a denied address is refused too), before
// any connection is made: a refusal never tells whether a port is open.
type HostPolicy struct {
	Allow, Deny []string
}

// Hosts is a HostPolicy ready to match (nil: everything allowed).
type Hosts struct {
	allow, deny hostrule.Rules
}

// ParseHostPolicy checks every entry; the error names the key and the bad
// entry.
func ParseHostPolicy(p HostPolicy) (*Hosts, error) {
	var c Hosts
	for _, list := range []struct {
		key     string
		entries []string
		dst     *hostrule.Rules
	}{{AllowHostsKey, p.Allow, &c.allow}, {DenyHostsKey, p.Deny, &c.deny}} {
		for _, e := range list.entries {
			r, err := hostrule.Parse(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", list.key, e, err)
			}
			*list.dst = append(*list.dst, r)
		}
	}
	return &c, nil
}

func (c *Hosts) empty() bool { return c == nil || len(c.allow)+len(c.deny) == 0 }

// checkName is the check of a URL's host before any dial; nameAllowed
// says whether an allow rule named it (then dialed addresses need no
// allow rule of their own).
func (c *Hosts) checkName(host string, port int) (nameAllowed bool, err error) {
	if c.empty() {
		return true, nil
	}
	if c.deny.ByName(host, port) {
		return false, refusal(DenyHostsKey)
	}
	if len(c.allow) == 0 {
		return true, nil
	}
	return c.allow.ByName(host, port), nil
}

// checkAddr is the check of an address about to be dialed.
func (c *Hosts) checkAddr(a netip.Addr, port int, nameAllowed bool) error {
	if c.empty() {
		return nil
	}
	a = a.Unmap()
	if c.deny.ByAddr(a, port) {
		return refusal(DenyHostsKey)
	}
	if len(c.allow) > 0 && !nameAllowed && !c.allow.ByAddr(a, port) {
		return refusal(AllowHostsKey)
	}
	return nil
}

func refusal(key string) error {
	if key == AllowHostsKey {
		return fmt.Errorf("%w (not in %s)", ErrHostRefused, key)
	}
	return fmt.Errorf("%w (%s)", ErrHostRefused, key)
}

// dialer returns a DialContext that checks every address it dials
// against the policy before connecting (nameAllowed: the URL's host was
// allowed by name).
func (c *Hosts) dialer(nameAllowed bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return refusal(DenyHostsKey)
			}
			return c.checkAddr(ap.Addr(), int(ap.Port()), nameAllowed)
		}}
	return d.DialContext
}

// DefaultDenyHosts are the upstreams refused whatever connector.deny_hosts
// adds: link-local addresses (the cloud metadata address 169.254.169.254
// among them). The daemon adds its own status address and the store's and
// the bus's host:port.
var DefaultDenyHosts = []string{"169.254.0.0/16", "fe80::/10"}
