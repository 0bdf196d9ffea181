package hostrule_test

import (
	"net/netip"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/hostrule"
)

func TestParseSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	for entry, want := range map[string]string{
		"":              "empty entry",
		"10.0.0.0/33":   "not a CIDR prefix",
		"host:0":        "bad port",
		"host:x":        "bad port",
		"a b":           "not a host, host:port or CIDR prefix",
		"[::1]:70000":   "bad port",
		"example.com:x": "bad port",
	} {
		if _, err := hostrule.Parse(entry); err == nil || err.Error() != want {
			t.Errorf("Parse(%q) = %v, want %q", entry, err, want)
		}
	}
}

func TestRulesMatch(t *testing.T) {
	t.Parallel()
	var rs hostrule.Rules
	for _, e := range []string{"Example.COM.", "10.0.0.0/8", "[::1]:5432", "192.0.2.1"} {
		r, err := hostrule.Parse(e)
		if err != nil {
			t.Fatalf("Parse(%q): %v", e, err)
		}
		rs = append(rs, r)
	}
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"example.com", 443, true}, {"EXAMPLE.com.", 80, true}, {"other.com", 443, false},
		{"10.1.2.3", 80, true}, {"[::1]", 5432, true}, {"[::1]", 80, false}, {"192.0.2.1", 1, true},
	} {
		if got := rs.ByName(c.host, c.port); got != c.want {
			t.Errorf("ByName(%s, %d) = %v", c.host, c.port, got)
		}
	}
	if !rs.ByAddr(netip.MustParseAddr("10.9.9.9"), 1) || rs.ByAddr(netip.MustParseAddr("11.0.0.1"), 1) ||
		!rs.ByAddr(netip.MustParseAddr("::1"), 5432) || rs.ByAddr(netip.MustParseAddr("::1"), 5433) {
		t.Error("ByAddr")
	}
}
