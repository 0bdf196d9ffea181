package config

import "strings"

// toolEnv are RECONCILER_* variables of the project's own scripts and
// tests, not keys: they are never reported as unknown.
var toolEnv = []string{
	"RECONCILER_TEST_DATABASE_URL", // scripts/with-postgres.sh, the tests' PostgreSQL
	"RECONCILER_TEST_PGDATA",       // the private cluster's data directory
	"RECONCILER_OBJECTSTACK_CACHE", // scripts/objectstack/install.sh
	"RECONCILER_OBJECTSTACK_MODULES",
}

// UnknownEnv is a RECONCILER_* environment variable that names no key.
type UnknownEnv struct {
	Name    string // the variable, as set
	Nearest string // the environment variable of the nearest key
}

// CheckEnv returns the RECONCILER_* variables of environ (KEY=VALUE
// lines, as os.Environ gives) that name no key, each with the nearest
// key's variable, so that a typo is reported instead of silently ignored.
// A variable that c names as one of its *_env keys (a token or secret
// kept in, say, RECONCILER_TOKEN) is not reported. Values are never read.
func CheckEnv(environ []string, c *Config) []UnknownEnv {
	known := map[string]bool{}
	var names []string
	for _, k := range declarations() {
		n := EnvName(k.Name)
		known[n] = true
		names = append(names, n)
	}
	for _, n := range toolEnv {
		known[n] = true
	}
	if c != nil {
		for _, n := range []string{c.StatusTokenEnv, c.WebhookSecretEnv, c.SecretsKeyEnv, c.ReplicaTokenEnv} {
			known[n] = true
		}
	}
	var out []UnknownEnv
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix+"_") || known[name] {
			continue
		}
		out = append(out, UnknownEnv{Name: name, Nearest: nearest(name, names)})
	}
	return out
}

// nearest returns the candidate with the smallest edit distance to s.
func nearest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(s, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes: the names
// are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
