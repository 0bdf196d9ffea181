package main

import (
	"net"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
)

func TestUsageAndExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		code     int
		contains string
	}{
		{nil, 2, "Commands:"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"help"}, 0, "Commands:"},
		{[]string{"version"}, 0, "reconciler e2e"},
		{[]string{"version", "--json"}, 0, `"version": "e2e"`},
		{[]string{"run", "--no-such-flag"}, 2, "unknown flag"},
		{[]string{"items", "--kind", "nope"}, 2, "unknown kind"},
		{[]string{"trigger", "--resync", "--drift"}, 2, "exclude each other"},
		{[]string{"status", "extra"}, 2, "unexpected argument"},
		{[]string{"status", "--addr", proctest.FreeAddr(t)}, 1, "not reachable"},
	} {
		r := reconciler(t, dir, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.contains) {
			t.Errorf("%v: exit %d, want %d containing %q\nstdout: %s\nstderr: %s", tc.args, r.code, tc.code, tc.contains, r.stdout, r.stderr)
		}
	}
	for _, c := range []string{"run", "migrate", "status", "items", "drift", "fleet", "trigger", "version"} {
		r := reconciler(t, dir, nil, c, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: reconciler "+c) {
			t.Errorf("%s --help: exit %d\n%s%s", c, r.code, r.stdout, r.stderr)
		}
	}
}

// Startup failures name the cause, exit 1 and leave nothing running: the
// status address is free again.
func TestStartupFailures(t *testing.T) {
	t.Parallel()
	emptyPG := testdb.New(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	for _, tc := range []struct {
		name     string
		config   string
		args     []string
		env      []string
		contains []string
	}{
		{name: "bad config file", config: "poll: [\n", contains: []string{"config file", "config.yaml"}},
		{name: "unknown key", config: "poll:\n  intervall: 1s\n", contains: []string{`unknown key "poll.intervall"`}},
		{name: "invalid cron spec", config: "drift:\n  schedule: \"99 * * * *\"\n", contains: []string{"drift.schedule", "invalid cron spec"}},
		{name: "bad duration from env", env: []string{"RECONCILER_POLL_INTERVAL=soon"}, contains: []string{"poll.interval", "bad duration"}},
		{name: "unknown scheme", args: []string{"--store.url", "mysql://x/y"}, contains: []string{"store.url", "unknown scheme"}},
		{name: "missing config file", args: []string{"--config", "nope.yaml"}, contains: []string{"nope.yaml", "no such file"}},
		{name: "unreachable store", args: []string{"--store.url", "postgres://postgres:canary-pw@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, contains: []string{"store unreachable"}},
		{name: "schema missing", args: []string{"--store.url", emptyPG}, contains: []string{"schema", "reconciler migrate", "--migrate"}},
		{name: "token env empty", args: []string{"--status.token_env", "E2E_NO_SUCH_TOKEN"}, contains: []string{"status.token_env", "E2E_NO_SUCH_TOKEN"}},
		{name: "busy address", args: []string{"--status.listen", busy.Addr().String()}, contains: []string{"status.listen", "address already in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.config != "" {
				writeConfig(t, dir, tc.config)
			}
			addr := proctest.FreeAddr(t)
			args := append([]string{"run", "--status.listen", addr, "--store.url", "sqlite://./s.db", "--drift.dir", "./drift"}, tc.args...)
			r := reconciler(t, dir, tc.env, args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
			}
			for _, want := range tc.contains {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not name %q:\n%s", want, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "canary-pw") {
				t.Errorf("password in output:\n%s", r.stderr)
			}
			if strings.Contains(r.stderr, "reconciler started") {
				t.Errorf("half started:\n%s", r.stderr)
			}
			if tc.name != "busy address" {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("status address still taken: %v", err)
				}
				ln.Close()
			}
		})
	}
}
