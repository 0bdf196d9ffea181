package config

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func flagSet(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestDefaults(t *testing.T) {
	c, err := Parse("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.StoreURL != DefaultStoreURL || c.PollInterval != time.Second || c.StatusListen != DefaultStatusListen ||
		c.ApplyConcurrency != 4 || !c.HintListen || c.LogLevel != slog.LevelInfo || c.LogFormat != "text" ||
		c.DriftSchedule != "@every 15m" || c.ReplicaID == "" {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "poll:\n  interval: 2s\n  jitter: 0s\napply:\n  concurrency: 2\nlog:\n  level: warn\n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want time.Duration
		conc int
	}{
		{name: "file", want: 2 * time.Second, conc: 2},
		{name: "env beats file", env: map[string]string{"RECONCILER_POLL_INTERVAL": "3s"}, want: 3 * time.Second, conc: 2},
		{name: "flag beats env", env: map[string]string{"RECONCILER_POLL_INTERVAL": "3s"}, args: []string{"--poll.interval=4s"}, want: 4 * time.Second, conc: 2},
		{name: "unset flag keeps file", args: []string{"--log.level=debug"}, want: 2 * time.Second, conc: 2},
		{name: "int from env", env: map[string]string{"RECONCILER_APPLY_CONCURRENCY": "7"}, want: 2 * time.Second, conc: 7},
		{name: "int from flag", args: []string{"--apply.concurrency=9"}, want: 2 * time.Second, conc: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Load(Source{File: file, Flags: flagSet(t, tc.args...)})
			if err != nil {
				t.Fatal(err)
			}
			if c.PollInterval != tc.want || c.ApplyConcurrency != tc.conc {
				t.Fatalf("poll.interval=%s apply.concurrency=%d, want %s %d", c.PollInterval, c.ApplyConcurrency, tc.want, tc.conc)
			}
			if c.File != file {
				t.Fatalf("File = %q", c.File)
			}
		})
	}
}

func TestEnvEveryKey(t *testing.T) {
	t.Setenv("RECONCILER_STORE_URL", "postgres://u:pw@db:5432/x")
	t.Setenv("RECONCILER_NOTIFY_EXEC_COMMAND", "/bin/echo a b")
	t.Setenv("RECONCILER_HINT_LISTEN", "false")
	t.Setenv("RECONCILER_STATUS_TOKEN_ENV", "MY_TOKEN")
	c, err := Parse("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.StoreURL != "postgres://u:pw@db:5432/x" || strings.Join(c.ExecCommand, "|") != "/bin/echo|a|b" || c.HintListen || c.StatusTokenEnv != "MY_TOKEN" {
		t.Fatalf("%+v", c)
	}
}

func TestExecCommandList(t *testing.T) {
	c, err := Parse("f.yaml", []byte("notify:\n  exec:\n    command: [\"/bin/sh\", \"-c\", \"cat > x\"]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ExecCommand) != 3 || c.ExecCommand[2] != "cat > x" {
		t.Fatalf("%q", c.ExecCommand)
	}
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		key, want  string // the error names key and contains want
	}{
		{name: "bad duration", file: "poll:\n  interval: fast\n", key: "poll.interval", want: "bad duration"},
		{name: "duration without unit", file: "poll:\n  interval: 5\n", key: "poll.interval", want: "bad duration"},
		{name: "zero interval", file: "poll:\n  interval: 0s\n", key: "poll.interval", want: "at least 50ms"},
		{name: "spinning poll", file: "poll:\n  interval: 1ns\n", key: "poll.interval", want: "must be at least 50ms (a shorter one keeps a core busy), got 1ns"},
		{name: "spinning poll from env", args: []string{"--poll.interval=49ms"}, key: "poll.interval", want: "at least 50ms"},
		{name: "spinning resync", file: "resync:\n  interval: 10ms\n", key: "resync.interval", want: "must be 0 (off) or at least 1s"},
		{name: "spinning retention", file: "journal:\n  retention: 1ns\n", key: "journal.retention", want: "must be at least 1m0s"},
		{name: "zero apply timeout", file: "apply:\n  timeout: 0s\n", key: "apply.timeout", want: "greater than zero"},
		{name: "public listen without token", file: "status:\n  listen: 0.0.0.0:9477\n", key: "status.listen", want: "not a loopback address: the status API needs a token there (set status.token_env)"},
		{name: "empty host listen without token", file: "status:\n  listen: \":9477\"\n", key: "status.listen", want: "needs a token"},
		{name: "named listen without token", file: "status:\n  listen: myhost:9477\n", key: "status.listen", want: "needs a token"},
		{name: "negative jitter", file: "poll:\n  jitter: -1s\n", key: "poll.jitter", want: "negative"},
		{name: "unknown scheme", file: "store:\n  url: mysql://x/y\n", key: "store.url", want: "unknown scheme"},
		{name: "not a url", file: "store:\n  url: just-a-path\n", key: "store.url", want: "not a URL"},
		{name: "invalid cron", file: "drift:\n  schedule: \"61 * * * *\"\n", key: "drift.schedule", want: "invalid cron spec"},
		{name: "bad descriptor", file: "drift:\n  schedule: \"@every banana\"\n", key: "drift.schedule", want: "invalid cron spec"},
		{name: "concurrency zero", file: "apply:\n  concurrency: 0\n", key: "apply.concurrency", want: "at least 1"},
		{name: "concurrency text", file: "apply:\n  concurrency: many\n", key: "apply.concurrency", want: "integer"},
		{name: "unknown key", file: "poll:\n  intervall: 1s\n", key: "poll.intervall", want: "unknown key"},
		{name: "unknown top key", file: "replicaid: x\n", key: "replicaid", want: "unknown key"},
		{name: "log level", file: "log:\n  level: loud\n", key: "log.level", want: "unknown level"},
		{name: "log format", file: "log:\n  format: xml\n", key: "log.format", want: "unknown format"},
		{name: "listen", file: "status:\n  listen: nowhere\n", key: "status.listen", want: "HOST:PORT"},
		{name: "token env name", file: "status:\n  token_env: \"a b\"\n", key: "status.token_env", want: "not an environment variable name"},
		{name: "webhook url", file: "notify:\n  webhook:\n    url: ftp://x\n", key: "notify.webhook.url", want: "http"},
		{name: "deny host prefix", file: "connector:\n  deny_hosts: [\"10.0.0.0/33\"]\n", key: "connector.deny_hosts", want: `"10.0.0.0/33": not a CIDR prefix`},
		{name: "allow host port", file: "connector:\n  allow_hosts: [\"api.example.com:0\"]\n", key: "connector.allow_hosts", want: `"api.example.com:0": bad port`},
		{name: "hint bool", file: "hint:\n  listen: perhaps\n", key: "hint.listen", want: "true or false"},
		{name: "section as value", file: "store:\n  url:\n    a: b\n", key: "store.url.a", want: "unknown key"},
		{name: "flag bad duration", args: []string{"--apply.timeout=soon"}, key: "apply.timeout", want: "bad duration"},
		{name: "yaml syntax", file: "poll: [\n", key: "config file", want: "config file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var data []byte
			name := ""
			if tc.file != "" {
				name, data = "c.yaml", []byte(tc.file)
			}
			_, err := Parse(name, data, flagSet(t, tc.args...))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q and %q", err, tc.key, tc.want)
			}
		})
	}
}

func TestErrorTyped(t *testing.T) {
	_, err := Parse("c.yaml", []byte("apply:\n  timeout: x\n"), nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != KeyApplyTimeout {
		t.Fatalf("want *Error for apply.timeout, got %v", err)
	}
}

func TestRedactInErrors(t *testing.T) {
	_, err := Parse("c.yaml", []byte("store:\n  url: \"mysql://u:canary-pw@h/db\"\n"), nil)
	if err == nil || strings.Contains(err.Error(), "canary-pw") {
		t.Fatalf("error %v", err)
	}
	_, err = Parse("c.yaml", []byte("store:\n  url: \"u:canary-pw@h/db\"\n"), nil)
	if err == nil || strings.Contains(err.Error(), "canary-pw") {
		t.Fatalf("error %v", err)
	}
}

func TestMissingExplicitFile(t *testing.T) {
	_, err := Load(Source{File: filepath.Join(t.TempDir(), "nope.yaml")})
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestSchedules(t *testing.T) {
	for _, s := range []string{"*/5 * * * *", "0 */5 * * * *", "@every 15m", "@hourly", "@daily"} {
		if _, err := ParseSchedule(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// The repository's config.yaml documents every key and loads as is.
func TestRepositoryConfig(t *testing.T) {
	path := filepath.Join("..", "..", "config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.StoreURL, "sqlite://") {
		t.Fatalf("store.url = %q, want the embedded SQLite store", c.StoreURL)
	}
	defaults, err := Parse("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ch := Changed(defaults, c); len(ch) > 0 {
		t.Errorf("config.yaml sets %v to other values than their defaults", ch)
	}
	documented := documentedKeys(t, data)
	for _, k := range Keys() {
		doc, ok := documented[k.Name]
		switch {
		case !ok:
			t.Errorf("config.yaml does not set %s (by its full path)", k.Name)
		case !doc:
			t.Errorf("config.yaml sets %s with no comment documenting it", k.Name)
		}
	}
	for name := range documented {
		if _, ok := lookupKey(name); !ok {
			t.Errorf("config.yaml sets %s, which is no key", name)
		}
	}
}

// documentedKeys walks a YAML document and returns every scalar or list
// key by its full dotted path, true when a comment documents it: its own
// comment, or that of the key just above it in a run of keys with no blank
// line between them (one comment may document a group of keys).
func documentedKeys(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(prefix string, m *yaml.Node)
	walk = func(prefix string, m *yaml.Node) {
		prevDoc, prevLine := false, -1
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			name := prefix + k.Value
			if v.Kind == yaml.MappingNode {
				walk(name+".", v)
				prevDoc, prevLine = false, -1
				continue
			}
			documented := k.HeadComment != "" || k.LineComment != "" || (prevDoc && k.Line == prevLine+1)
			out[name] = documented
			prevDoc, prevLine = documented, k.Line
		}
	}
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		walk("", doc.Content[0])
	}
	return out
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("poll:\n  interval: 1s\n"))
	f.Add([]byte("store:\n  url: postgres://u:p@h/db\ndrift:\n  schedule: \"*/5 * * * *\"\n"))
	f.Add([]byte("notify:\n  exec:\n    command: [a, 1, true]\n"))
	f.Add([]byte("apply: {concurrency: 1.5}\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, nil)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if c.PollInterval <= 0 || c.ApplyConcurrency < 1 || c.ApplyTimeout <= 0 || c.StoreURL == "" {
			t.Fatalf("invalid config accepted: %+v", c)
		}
		if c.DriftSchedule != "" {
			if _, err := ParseSchedule(c.DriftSchedule); err != nil {
				t.Fatalf("invalid schedule accepted: %q", c.DriftSchedule)
			}
		}
	})
}

func TestListenNeedsTokenOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		listen, tokenEnv string
		ok               bool
	}{
		{"127.0.0.1:9477", "", true},
		{"localhost:9477", "", true},
		{"[::1]:9477", "", true},
		{"127.3.4.5:0", "", true},
		{"0.0.0.0:9477", "", false},
		{"[::]:9477", "", false},
		{":9477", "", false},
		{"10.1.2.3:9477", "", false},
		{"0.0.0.0:9477", "RECONCILER_TOKEN", true},
		{"reconciler.internal:9477", "RECONCILER_TOKEN", true},
	} {
		_, err := Parse("", nil, flagSet(t, "--status.listen="+tc.listen, "--status.token_env="+tc.tokenEnv))
		if (err == nil) != tc.ok {
			t.Errorf("listen %s token_env %q: %v, want ok=%v", tc.listen, tc.tokenEnv, err, tc.ok)
		}
	}
}
