package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is the end of a bench command's main: it runs run under a context
// that SIGINT and SIGTERM cancel and, when run fails, prints the error
// after name and exits 1.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
