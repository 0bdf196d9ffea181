package connector_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/connector"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// TestHostPolicy: upstreams the policy denies (by address, name, CIDR of
// the dialed address, or missing from the allow list) are held naming the
// key before any connection, with one reason whether the port is open or
// closed; what the policy allows is probed as before.
func TestHostPolicy(t *testing.T) {
	t.Parallel()
	open := newUpstream(t)
	allowed := newUpstream(t)
	ou, _ := url.Parse(open.URL)
	au, _ := url.Parse(allowed.URL)
	closedAddr := proctest.FreeAddr(t)
	_, closedPort, _ := net.SplitHostPort(closedAddr)
	probe := "/auth/x?want=bearer"
	materialize := func(p connector.HostPolicy, base string) (string, error) {
		t.Helper()
		h, err := connector.ParseHostPolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		m := connector.New(connector.Options{Hosts: h})
		inst, err := m.Materialize(context.Background(), desired(body("rest", base, probe, "", bearer), canary))
		if err == nil {
			_ = inst.Close()
			return "", nil
		}
		c, reason := reconcile.Classify(err)
		if c != reconcile.ClassInvalid {
			return reason, fmt.Errorf("class %v (%s), want invalid", c, reason)
		}
		return reason, nil
	}
	for _, c := range []struct {
		name   string
		policy connector.HostPolicy
		base   string
		want   string // "" ready
	}{
		{"deny address:port", connector.HostPolicy{Deny: []string{ou.Host}}, open.URL, "upstream " + ou.Host + ": upstream host refused by the host policy (connector.deny_hosts)"},
		{"deny name", connector.HostPolicy{Deny: []string{"LocalHost"}}, "http://localhost:" + ou.Port(), "(connector.deny_hosts)"},
		{"deny the dialed address's prefix", connector.HostPolicy{Deny: []string{"127.0.0.0/8", "::1/128"}}, "http://localhost:" + ou.Port(), "(connector.deny_hosts)"},
		{"link-local", connector.HostPolicy{Deny: connector.DefaultDenyHosts}, "http://169.254.169.254/latest/meta-data", "upstream 169.254.169.254:80: upstream host refused by the host policy (connector.deny_hosts)"},
		{"not allowed", connector.HostPolicy{Allow: []string{au.Host}}, open.URL, "(not in connector.allow_hosts)"},
		{"allowed", connector.HostPolicy{Allow: []string{au.Host}}, allowed.URL, ""},
		{"allowed by name", connector.HostPolicy{Allow: []string{"localhost"}}, "http://localhost:" + au.Port(), ""},
		{"default deny keeps loopback", connector.HostPolicy{Deny: connector.DefaultDenyHosts}, allowed.URL, ""},
	} {
		hits := open.hits.Load()
		reason, err := materialize(c.policy, c.base)
		if err != nil || !strings.Contains(reason, c.want) || (c.want == "") != (reason == "") {
			t.Errorf("%s: %q %v, want %q", c.name, reason, err, c.want)
		}
		if c.want != "" && open.hits.Load() != hits {
			t.Errorf("%s: the refused upstream received a request", c.name)
		}
	}
	// Open and closed ports read the same.
	deny := connector.HostPolicy{Deny: []string{"127.0.0.1"}}
	r1, _ := materialize(deny, open.URL)
	r2, _ := materialize(deny, "http://"+closedAddr)
	if strings.ReplaceAll(r1, ou.Port(), "P") != strings.ReplaceAll(r2, closedPort, "P") {
		t.Errorf("an open and a closed port read differently: %q vs %q", r1, r2)
	}
	if _, err := connector.ParseHostPolicy(connector.HostPolicy{Deny: []string{"10.0.0.0/33"}}); err == nil || !strings.Contains(err.Error(), "connector.deny_hosts") {
		t.Errorf("bad entry: %v, want an error naming the key", err)
	}
}
