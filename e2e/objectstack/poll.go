//go:build objectstack

package objectstack

import (
	"errors"
	"fmt"
	"time"
)

// errExited is returned by poll when the watched process exited.
var errExited = errors.New("process exited")

// poll calls try every tick until it returns nil, the deadline passes
// (the error names try's last error) or exited is closed.
func poll(within, tick time.Duration, exited <-chan struct{}, try func() error) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%w (last: %v)", errExited, err)
		case <-deadline.C:
			return fmt.Errorf("not within %s: %w", within, err)
		case <-ticker.C:
		}
	}
}
