package snapshot

import (
	"fmt"
	"net/url"
	"strings"
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
		return newSQLite(rawURL, opts)
	default:
		return nil, badURL(rawURL, fmt.Sprintf("unknown scheme %q (want postgres://, postgresql:// or sqlite://)", scheme))
	}
}

func badURL(rawURL, problem string) error {
	return fmt.Errorf("%w %s: %s", ErrBadURL, RedactURL(rawURL), problem)
}

const redactedPassword = "xxxxx"

// RedactURL returns u with any password replaced by xxxxx, for logs and
// errors. It also redacts a password query parameter and copes with URLs
// that do not parse.
func RedactURL(u string) string {
	if p, err := url.Parse(u); err == nil && p.Opaque == "" {
		changed := false
		if p.User != nil {
			if _, has := p.User.Password(); has {
				p.User = url.UserPassword(p.User.Username(), redactedPassword)
				changed = true
			}
		}
		if q := p.Query(); q.Has("password") {
			q.Set("password", redactedPassword)
			p.RawQuery = q.Encode()
			changed = true
		}
		if changed {
			return p.String()
		}
		return u
	}
	// Unparseable or without a scheme: cut userinfo's password by hand,
	// from "user:" to the last "@" before the path.
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		rest = u
	}
	start := len(u) - len(rest)
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return u
	}
	colon := strings.Index(rest[:at], ":")
	if colon < 0 {
		return u
	}
	return u[:start+colon+1] + redactedPassword + u[start+at:]
}

// urlPassword returns the password in u, if any, so that driver messages
// can be scrubbed of it.
func urlPassword(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	var pw string
	if p.User != nil {
		pw, _ = p.User.Password()
	}
	if q := p.Query().Get("password"); q != "" && pw == "" {
		pw = q
	}
	return pw
}

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

func scrub(msg, password string) string {
	if password == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, password, redactedPassword)
	return strings.ReplaceAll(msg, url.QueryEscape(password), redactedPassword)
}
