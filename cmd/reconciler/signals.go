package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// signals are caught on the first line of main, before the configuration
// is read: a signal that arrives while the daemon starts neither kills the
// process (the default action of SIGHUP, SIGUSR1 and SIGUSR2) nor is lost.
// Each request kind has a channel of capacity one, so a burst coalesces
// into one pending request and can never crowd out a stop signal.
type signals struct {
	stop   chan os.Signal // SIGINT, SIGTERM: room for the second one
	reload chan os.Signal // SIGHUP
	resync chan os.Signal // SIGUSR1
	drift  chan os.Signal // SIGUSR2

	// log, once set, receives the line of a second stop signal.
	log atomic.Pointer[slog.Logger]
}

func catchSignals() *signals {
	s := &signals{
		stop:   make(chan os.Signal, 2),
		reload: make(chan os.Signal, 1),
		resync: make(chan os.Signal, 1),
		drift:  make(chan os.Signal, 1),
	}
	signal.Notify(s.stop, syscall.SIGINT, syscall.SIGTERM)
	signal.Notify(s.reload, syscall.SIGHUP)
	signal.Notify(s.resync, syscall.SIGUSR1)
	signal.Notify(s.drift, syscall.SIGUSR2)
	return s
}

// stopSignal is the cause of a context ended by SIGINT or SIGTERM.
type stopSignal struct{ sig os.Signal }

func (s stopSignal) Error() string { return "stopped by " + s.sig.String() }

// stopContext returns a context that the first SIGINT or SIGTERM ends
// (its cause is a stopSignal); a second one exits at once with
// exitFailure. The watching goroutine lives as long as the process.
func (s *signals) stopContext(parent context.Context, stderr io.Writer) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		sig := <-s.stop
		cancel(stopSignal{sig})
		sig = <-s.stop
		if log := s.log.Load(); log != nil {
			log.Warn("second stop signal: exiting now", slog.String("signal", sig.String()))
		} else {
			fmt.Fprintf(stderr, "reconciler: second stop signal (%s): exiting now\n", sig)
		}
		os.Exit(exitFailure)
	}()
	return ctx
}

// forClient restores the default action of the daemon's request signals:
// only `run` acts on them.
func (s *signals) forClient() {
	signal.Reset(syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
}

// daemonControl is what the request signals ask of a running daemon.
type daemonControl interface {
	Reload()
	Resync()
	DriftNow()
}

// serve maps the request signals to d until done is closed. A signal that
// came before serve started is still pending in its channel and is served
// first; each request is non-blocking and coalescing.
func (s *signals) serve(d daemonControl, log *slog.Logger, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-s.reload:
			log.Info("SIGHUP: reloading the configuration and reconciling")
			d.Reload()
		case <-s.resync:
			log.Info("SIGUSR1: full resync requested")
			d.Resync()
		case <-s.drift:
			log.Info("SIGUSR2: drift report requested")
			d.DriftNow()
		}
	}
}
