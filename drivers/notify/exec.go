package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// DefaultExecTimeout bounds one run of the command.
const DefaultExecTimeout = 30 * time.Second

// ExecOptions configure an Exec. Zero values take the defaults.
type ExecOptions struct {
	// Command is the argv to run; no shell is involved.
	Command []string
	// Env is the command's whole environment (nil: MinimalEnv(), never
	// the daemon's, which may hold tokens and secrets).
	Env []string
	// Dir is the command's working directory ("": the daemon's).
	Dir string
	// Timeout bounds each run (default 30s); the command is killed then.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed runs,
	// doubling from min to max (default 200ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// OnAttempt, if set, is called by the sender after every run with the
	// change set sent and its outcome (nil: exited 0).
	OnAttempt func(cs reconcile.ChangeSet, err error)
	// Logger; default discards.
	Logger *slog.Logger
}

// ExecEnvKeys are the variables of the daemon's environment an exec
// command gets (when set): where to find programs, the locale, the time
// zone, the user and temporary files. Nothing else is passed — not the
// status token, the webhook secret, store URLs or anything the daemon's
// environment holds besides.
var ExecEnvKeys = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// MinimalEnv returns the environment of an exec command: ExecEnvKeys from
// the daemon's environment, PATH defaulting to /usr/local/bin:/usr/bin:/bin.
func MinimalEnv() []string {
	env := make([]string, 0, len(ExecEnvKeys))
	for _, k := range ExecEnvKeys {
		v, ok := os.LookupEnv(k)
		if !ok && k == "PATH" {
			v, ok = "/usr/local/bin:/usr/bin:/bin", true
		}
		if ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Exec runs a command per change set. Create it with NewExec, run Run in
// a goroutine, and hand it to the loop as its Notifier.
type Exec struct {
	opts ExecOptions
	q    *queue
	b    backoff.Policy
	log  *slog.Logger
}

var _ reconcile.Notifier = (*Exec)(nil)

// ErrNoCommand is returned by Run when Command is empty.
var ErrNoCommand = errors.New("notify exec: no command")

// NewExec returns an Exec. It does no I/O.
func NewExec(opts ExecOptions) *Exec {
	e := &Exec{opts: opts, q: newQueue(), b: newBackoff(opts.MinBackoff, opts.MaxBackoff), log: opts.Logger}
	if e.opts.Timeout <= 0 {
		e.opts.Timeout = DefaultExecTimeout
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e
}

// Notify queues cs for the next run, coalescing with what is pending. It
// never blocks.
func (e *Exec) Notify(cs reconcile.ChangeSet) { e.q.put(cs) }

// Run runs the command for queued change sets, one at a time, until ctx
// ends, then returns nil (ErrNoCommand at once when there is no command).
func (e *Exec) Run(ctx context.Context) error {
	if len(e.opts.Command) == 0 || e.opts.Command[0] == "" {
		return ErrNoCommand
	}
	return deliver(ctx, e.q, e.b, e.log, "exec", e.send, e.opts.OnAttempt)
}

// tail keeps the last bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if n := len(t.b) - 2048; n > 0 {
		t.b = t.b[n:]
	}
	return len(p), nil
}

func (e *Exec) send(ctx context.Context, cs reconcile.ChangeSet) error {
	body, err := json.Marshal(payload(cs))
	if err != nil {
		return fmt.Errorf("encode change set: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, e.opts.Command[0], e.opts.Command[1:]...)
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env, cmd.Dir = e.opts.Env, e.opts.Dir
	if cmd.Env == nil {
		cmd.Env = MinimalEnv()
	}
	var out tail
	cmd.Stdout, cmd.Stderr = &out, &out
	// Do not wait for grandchildren holding the output pipe after a kill.
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if err != nil && rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return fmt.Errorf("run %s: timed out after %v", e.opts.Command[0], e.opts.Timeout)
	}
	if err != nil {
		return fmt.Errorf("run %s: %w: %s", e.opts.Command[0], err, strings.TrimSpace(string(out.b)))
	}
	return nil
}
