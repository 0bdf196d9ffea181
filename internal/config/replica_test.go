package config

import (
	"strings"
	"testing"
	"time"
)

func TestReplicaKeys(t *testing.T) {
	c, err := Parse("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReplicaURL != "" || c.ReplicaBusPrefix != "os:" || c.ReplicaOrigin != "reconciler:"+c.ReplicaID {
		t.Fatalf("defaults: url %q prefix %q origin %q", c.ReplicaURL, c.ReplicaBusPrefix, c.ReplicaOrigin)
	}
	c, err = Parse("c.yaml", []byte("replica_id: r1\nreplica:\n  url: http://127.0.0.1:3000\n  token_env: OS_TOKEN\n  bus:\n    url: redis://:pw@127.0.0.1:6379/0\n    prefix: \"fleet:\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReplicaURL != "http://127.0.0.1:3000" || c.ReplicaTokenEnv != "OS_TOKEN" || c.ReplicaBusPrefix != "fleet:" || c.ReplicaOrigin != "reconciler:r1" {
		t.Fatalf("%+v", c)
	}
	for _, tc := range []struct{ name, file, key, want string }{
		{"url scheme", "replica:\n  url: ftp://x\n  bus:\n    url: redis://h:1\n", "replica.url", "http"},
		{"bus required", "replica:\n  url: http://x:1\n", "replica.bus.url", "required"},
		{"bus scheme", "replica:\n  bus:\n    url: http://u:secretpw@h:1\n", "replica.bus.url", "redis://"},
		{"token env name", "replica:\n  token_env: \"a-b\"\n", "replica.token_env", "not an environment variable name"},
		{"empty prefix", "replica:\n  bus:\n    prefix: \"\"\n", "replica.bus.prefix", "non-empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.file), nil)
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not name %q and %q", err, tc.key, tc.want)
			}
			if strings.Contains(err.Error(), "secretpw") {
				t.Fatalf("error shows a password: %v", err)
			}
		})
	}
	t.Setenv("RECONCILER_REPLICA_ORIGIN", "sidecar-7")
	if c, err := Parse("", nil, flagSet(t, "--replica.bus.prefix=x:")); err != nil || c.ReplicaOrigin != "sidecar-7" || c.ReplicaBusPrefix != "x:" {
		t.Fatalf("env/flag: %v %+v", err, c)
	}
}

func TestRestartKeys(t *testing.T) {
	c, err := Parse("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.RestartCommand) != 0 || c.RestartAfter != 5*time.Minute || c.RestartMinInterval != 30*time.Minute || c.RestartLeaseTimeout != 10*time.Minute {
		t.Fatalf("defaults: %q %s %s %s", c.RestartCommand, c.RestartAfter, c.RestartMinInterval, c.RestartLeaseTimeout)
	}
	base := "replica:\n  url: http://127.0.0.1:3000\n  bus:\n    url: redis://h:1\n  restart:\n"
	c, err = Parse("c.yaml", []byte(base+"    command: [systemctl, restart, objectstack]\n    after: 1s\n    min_interval: 2m\n    lease_timeout: 90s\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.RestartCommand, " ") != "systemctl restart objectstack" || c.RestartAfter != time.Second || c.RestartMinInterval != 2*time.Minute || c.RestartLeaseTimeout != 90*time.Second {
		t.Fatalf("%+v", c)
	}
	for _, tc := range []struct{ name, file, key, want string }{
		{"after below 1s", base + "    after: 500ms\n", "replica.restart.after", "at least 1s"},
		{"min_interval below 1s", base + "    min_interval: 0s\n", "replica.restart.min_interval", "at least 1s"},
		{"lease_timeout below 1s", base + "    lease_timeout: -1m\n", "replica.restart.lease_timeout", "at least 1s"},
		{"lease_timeout not a duration", base + "    lease_timeout: soon\n", "replica.restart.lease_timeout", "bad duration"},
		{"command without a replica", "replica:\n  restart:\n    command: [true]\n", "replica.restart.command", "replica.url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.file), nil)
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not name %q and %q", err, tc.key, tc.want)
			}
		})
	}
	t.Setenv("RECONCILER_REPLICA_RESTART_AFTER", "3s")
	if c, err := Parse("", nil, flagSet(t, "--replica.restart.lease_timeout=4s")); err != nil || c.RestartAfter != 3*time.Second || c.RestartLeaseTimeout != 4*time.Second {
		t.Fatalf("env/flag: %v %+v", err, c)
	}
}
