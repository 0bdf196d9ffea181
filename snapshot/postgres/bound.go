package postgres

import (
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bounds on waiting for a PostgreSQL server over a path that died without
// a word (a silent partition, a half-open connection: no RST, no FIN).
//
//   - Connecting (dial, TLS, startup and authentication) gives up after
//     connectTimeout, unless the URL sets connect_timeout.
//   - A statement whose request or reply is stuck (bytes sent and not
//     acknowledged) fails after tcpUserTimeout: the kernel drops the
//     connection and the call returns an error.
//   - A connection that waits for a reply or a notification with nothing
//     in flight sends keepalive probes after keepAliveIdle of silence;
//     unanswered probes count towards the same tcpUserTimeout.
//
// So a dead path is detected within keepAliveIdle + tcpUserTimeout
// (DeadPathBound, 15 s) whatever the connection was doing, and a new
// connection attempt within connectTimeout (10 s). These are client-side
// socket options only: no startup parameter is sent for them, so a
// connection pooler such as PgBouncer accepts the connection as it is.
const (
	connectTimeout    = 10 * time.Second
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
	tcpUserTimeout    = 10 * time.Second

	// DeadPathBound is the longest a store call waits on a connection
	// whose network path died silently before it fails.
	DeadPathBound = keepAliveIdle + tcpUserTimeout
)

// boundWaits sets the connect timeout, TCP keepalives and the TCP user
// timeout on cfg.
func boundWaits(cfg *pgx.ConnConfig) {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
		Control: func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			return setUserTimeout(c, tcpUserTimeout)
		},
	}
	cfg.DialFunc = d.DialContext
}
