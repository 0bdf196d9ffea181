//go:build unix

package reconcile

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system, all threads) this process has
// used so far: on a shared machine it varies far less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
