package hostrule

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one parsed entry.
type Rule struct {
	name   string // lower-case host name, or ""
	addr   netip.Addr
	prefix netip.Prefix
	port   int // 0: any
}

// Rules match a host or an address when one of them does.
type Rules []Rule

// Parse reads one entry: a host name or IP address (any port), host:port
// ([v6]:port), or a CIDR prefix. The error says what is wrong with it.
func Parse(e string) (Rule, error) {
	e = strings.TrimSpace(e)
	if e == "" {
		return Rule{}, errors.New("empty entry")
	}
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return Rule{}, errors.New("not a CIDR prefix")
		}
		return Rule{prefix: p.Masked()}, nil
	}
	host, port := e, 0
	if h, ps, err := net.SplitHostPort(e); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, errors.New("bad port")
		}
		host, port = h, n
	}
	host = strings.Trim(host, "[]")
	if a, err := netip.ParseAddr(host); err == nil {
		return Rule{addr: a.Unmap(), port: port}, nil
	}
	if host == "" || strings.ContainsAny(host, " :") {
		return Rule{}, errors.New("not a host, host:port or CIDR prefix")
	}
	return Rule{name: strings.ToLower(strings.TrimSuffix(host, ".")), port: port}, nil
}

func portMatches(rule, port int) bool { return rule == 0 || rule == port }

// ByName reports whether a rule names host (a URL's) and port.
func (rs Rules) ByName(host string, port int) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, r := range rs {
		if !portMatches(r.port, port) {
			continue
		}
		if r.name != "" && r.name == host {
			return true
		}
		if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && r.matchAddr(a.Unmap()) {
			return true
		}
	}
	return false
}

func (r Rule) matchAddr(a netip.Addr) bool {
	switch {
	case r.prefix.IsValid():
		return r.prefix.Contains(a)
	case r.addr.IsValid():
		return r.addr == a
	}
	return false
}

// ByAddr reports whether a rule matches a dialed address and port.
func (rs Rules) ByAddr(a netip.Addr, port int) bool {
	for _, r := range rs {
		if portMatches(r.port, port) && r.matchAddr(a) {
			return true
		}
	}
	return false
}
