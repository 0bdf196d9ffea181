package datasource_test

import (
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func portOf(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

func pgxParse(s string) (*pgconn.Config, error) { return pgconn.ParseConfig(s) }

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count fds: %v", err)
	}
	return len(ents)
}
