//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// setUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist: there
// the keepalives alone detect a dead path (keepAliveIdle +
// keepAliveInterval × keepAliveCount).
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
