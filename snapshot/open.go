package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/internal/storeurl"
)

// Backend is one store implementation, registered by its package's init
// with Register: a package of its own (snapshot/postgres, snapshot/sqlite)
// that implements Store and passes snapshottest's conformance suite.
type Backend struct {
	// Kind names the backend: its stores' Kind.
	Kind string
	// Schemes are the URL schemes it opens, lower case; Open matches them
	// without regard to case.
	Schemes []string
	// Form is how its URLs are written, for messages ("sqlite://PATH").
	Form string
	// CheckURL checks a URL's form without I/O, for store.url's check at
	// configuration load; its error is the whole message.
	CheckURL func(rawURL string) error
	// Standby is set when it takes OpenOptions.ReadURL; Open refuses a
	// read URL for the others.
	Standby bool
	// Schema is its embedded migrations.
	Schema Schema
	// Open returns a store without doing any I/O; a malformed URL returns
	// an error wrapping ErrBadURL.
	Open func(rawURL string, opts OpenOptions) (Store, error)
}

var (
	backendsMu sync.RWMutex
	backends   = map[string]Backend{} // by kind
)

// Register makes a backend's schemes open with Open (and pass store.url's
// check): a backend package calls it from its init, so that importing the
// package (see snapshot/backends) is all that links it in. Registering a
// kind or scheme twice panics.
func Register(b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if _, dup := backends[b.Kind]; dup {
		panic(fmt.Sprintf("snapshot: backend %q registered twice", b.Kind))
	}
	storeurl.Register(storeurl.Scheme{Kind: b.Kind, Names: b.Schemes, Form: b.Form, Check: b.CheckURL, Standby: b.Standby})
	backends[b.Kind] = b
}

func backendsByKind() []Backend {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	out := make([]Backend, 0, len(backends))
	for _, b := range backends {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Backend) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// Open returns the store named by rawURL without doing any I/O, from the
// backend registered for its scheme: postgres:// or postgresql:// open a
// PostgreSQL store, sqlite://rel/path.db and sqlite:///abs/path.db a
// SQLite store (when snapshot/backends is linked in). A malformed URL or
// an unknown scheme returns an error wrapping ErrBadURL that lists the
// schemes there are; an unreachable store shows up on first use as an
// error wrapping ErrUnavailable.
func Open(rawURL string, opts OpenOptions) (Store, error) {
	sc, err := storeurl.Lookup(rawURL)
	var unknown *storeurl.UnknownError
	switch {
	case errors.As(err, &unknown):
		return nil, BadURL(rawURL, fmt.Sprintf("unknown scheme %q (want %s)", unknown.Scheme, storeurl.Want()))
	case err != nil:
		return nil, BadURL(rawURL, fmt.Sprintf("missing scheme (want %s)", storeurl.Want()))
	}
	backendsMu.RLock()
	b, ok := backends[sc.Kind]
	backendsMu.RUnlock()
	if !ok { // registered with storeurl alone: a URL form, no store
		return nil, BadURL(rawURL, fmt.Sprintf("no store backend opens %s:// (want %s)", strings.ToLower(sc.Names[0]), storeurl.Want()))
	}
	if opts.ReadURL != "" && !b.Standby {
		return nil, BadURL(opts.ReadURL, fmt.Sprintf("a read url needs a %s store (a %s store has no standby)", storeurl.WantStandby(), b.Kind))
	}
	return b.Open(rawURL, opts)
}

// BadURL returns an error wrapping ErrBadURL for a backend's Open: the
// redacted URL and the problem.
func BadURL(rawURL, problem string) error {
	return fmt.Errorf("%w %s: %s", ErrBadURL, redact.URL(rawURL), problem)
}

// StoreError is what stores return for driver failures: the operation, the
// redacted URL, a sentinel and the driver's message, scrubbed of the
// password. It never holds a driver type: a backend maps its driver's
// errors to one, in one place.
type StoreError struct {
	Op       string
	URL      string // redacted
	Sentinel error  // ErrUnavailable, ErrSchema or nil
	Msg      string // scrubbed of the URL's secrets
	Cause    error  // context.Canceled or DeadlineExceeded when the cause
}

func (e *StoreError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(" ")
	b.WriteString(e.URL)
	b.WriteString(": ")
	if e.Sentinel != nil {
		b.WriteString(e.Sentinel.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel and the context error.
func (e *StoreError) Unwrap() []error {
	var errs []error
	if e.Sentinel != nil {
		errs = append(errs, e.Sentinel)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}
