package snapshot

import (
	"fmt"
	"strings"

	"github.com/objectstack-fleet/reconciler/internal/redact"
)

// Open returns the store named by rawURL without doing any I/O:
// postgres:// or postgresql:// open a PostgreSQL store, sqlite://rel/path.db
// and sqlite:///abs/path.db a SQLite store. A malformed URL or an unknown
// scheme returns an error wrapping ErrBadURL; an unreachable store shows up
// on first use as an error wrapping ErrUnavailable.
func Open(rawURL string, opts OpenOptions) (Store, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, badURL(rawURL, "missing scheme (want postgres://, postgresql:// or sqlite://)")
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return newPG(rawURL, opts, nil)
	case "sqlite":
		if opts.ReadURL != "" {
			return nil, badURL(opts.ReadURL, "a read url needs a PostgreSQL store (a SQLite store has no standby)")
		}
		return newSQLite(rawURL, opts)
	default:
		return nil, badURL(rawURL, fmt.Sprintf("unknown scheme %q (want postgres://, postgresql:// or sqlite://)", scheme))
	}
}

func badURL(rawURL, problem string) error {
	return fmt.Errorf("%w %s: %s", ErrBadURL, redact.URL(rawURL), problem)
}

// urlPassword returns the secrets in u, so that driver messages can be
// scrubbed of them.
func urlPassword(u string) []string { return redact.URLSecrets(u) }

// storeError is what stores return for driver failures: the operation, the
// redacted URL, a sentinel and the driver's message, scrubbed of the
// password. It never holds a driver type.
type storeError struct {
	op       string
	url      string
	sentinel error // ErrUnavailable, ErrSchema or nil
	msg      string
	ctxErr   error // context.Canceled or DeadlineExceeded when the cause
}

func (e *storeError) Error() string {
	var b strings.Builder
	b.WriteString(e.op)
	b.WriteString(" ")
	b.WriteString(e.url)
	b.WriteString(": ")
	if e.sentinel != nil {
		b.WriteString(e.sentinel.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

func (e *storeError) Unwrap() []error {
	var errs []error
	if e.sentinel != nil {
		errs = append(errs, e.sentinel)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

func scrub(msg string, secrets []string) string { return redact.Secrets(msg, secrets...) }
