package snapshot_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

func TestOpenBadURL(t *testing.T) {
	t.Parallel()
	const pw = "s3cr3t-pw"
	for _, tc := range []struct{ url, want string }{
		{"postgres://u:" + pw + "@[::1", "missing ']'"},
		{"postgres://u:" + pw + "@host:notaport/db", "port"},
		{"mysql://u:" + pw + "@host/db", `unknown scheme "mysql" (want postgres://, postgresql:// or sqlite://)`},
		{"u:" + pw + "@host/db", "missing scheme (want postgres://, postgresql:// or sqlite://)"},
		{"sqlite://", "missing database file path"},
		{"sqlite:///a.db?mode=ro", "no query"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s, err := snapshot.Open(tc.url, snapshot.OpenOptions{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, snapshot.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open error %q: want ErrBadURL naming %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("error shows the password: %q", err)
			}
		})
	}
}

func TestUnreachableStore(t *testing.T) {
	t.Parallel()
	const pw = "s3cr3t-pw"
	for _, tc := range []struct{ url, names string }{
		{"postgres://u:" + pw + "@127.0.0.1:1/db?sslmode=disable", "postgres://u:xxxxx@127.0.0.1:1/db"},
		{"sqlite://" + t.TempDir() + "/no/such/dir/x.db", "/no/such/dir/x.db"},
	} {
		t.Run(tc.names, func(t *testing.T) {
			s, err := snapshot.Open(tc.url, snapshot.OpenOptions{})
			if err != nil {
				t.Fatalf("Open does no I/O, yet: %v", err)
			}
			defer s.Close()
			ctx := context.Background()
			for op, call := range map[string]func() error{
				"ping":    func() error { return s.Ping(ctx) },
				"migrate": func() error { return s.Migrate(ctx) },
				"poll": func() error {
					_, _, err := s.Poll(ctx, snapshot.Cursor{StoreID: "x", PGSnapshot: "5:5:"})
					return err
				},
			} {
				err := call()
				if !errors.Is(err, snapshot.ErrUnavailable) {
					t.Fatalf("%s on an unreachable store = %v, want ErrUnavailable", op, err)
				}
				if msg := err.Error(); !strings.Contains(msg, op) || !strings.Contains(msg, tc.names) || strings.Contains(msg, pw) {
					t.Fatalf("%s error %q: want the operation and %q, no password", op, msg, tc.names)
				}
			}
		})
	}
}
