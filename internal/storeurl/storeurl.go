package storeurl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Scheme is what a store backend tells the URL checks about itself.
type Scheme struct {
	// Kind is the backend's name ("postgres", "sqlite"): the store's Kind.
	Kind string
	// Names are the URL schemes it opens, lower case ("postgres",
	// "postgresql").
	Names []string
	// Form is how its URLs are written, for messages ("postgres://…").
	Form string
	// Check reports whether a URL of one of Names is well formed, without
	// I/O (nil: any is).
	Check func(rawURL string) error
	// Standby is set when the backend takes a read URL of a hot standby
	// (store.read_url).
	Standby bool
}

var (
	mu      sync.RWMutex
	schemes = map[string]Scheme{} // by URL scheme
)

// Register adds a backend's schemes; registering a scheme twice panics (two
// backends would claim one URL).
func Register(s Scheme) {
	mu.Lock()
	defer mu.Unlock()
	if s.Kind == "" || len(s.Names) == 0 {
		panic("storeurl: register needs a kind and at least one scheme")
	}
	for _, n := range s.Names {
		n = strings.ToLower(n)
		if _, dup := schemes[n]; dup {
			panic(fmt.Sprintf("storeurl: scheme %q registered twice", n))
		}
		schemes[n] = s
	}
}

// ErrNoScheme is returned by Lookup for a URL without "scheme://".
var ErrNoScheme = errors.New("missing scheme")

// UnknownError is returned by Lookup for a scheme no backend registered.
type UnknownError struct{ Scheme string }

func (e *UnknownError) Error() string { return fmt.Sprintf("unknown scheme %q", e.Scheme) }

// Lookup returns the backend registered for rawURL's scheme (matched
// without regard to case). It does not check the rest of the URL.
func Lookup(rawURL string) (Scheme, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return Scheme{}, ErrNoScheme
	}
	mu.RLock()
	s, ok := schemes[strings.ToLower(scheme)]
	mu.RUnlock()
	if !ok {
		return Scheme{}, &UnknownError{Scheme: scheme}
	}
	return s, nil
}

// Names lists every registered URL scheme, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(schemes))
	for n := range schemes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Kinds lists the registered backends, sorted by kind.
func Kinds() []Scheme {
	mu.RLock()
	defer mu.RUnlock()
	var out []Scheme
	for _, s := range schemes {
		if !slices.ContainsFunc(out, func(o Scheme) bool { return o.Kind == s.Kind }) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Scheme) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// Want lists the registered schemes as a message's hint:
// "postgres://, postgresql:// or sqlite://" ("no store backend is linked
// in" when none is).
func Want() string {
	return join(Names(), func(n string) string { return n + "://" })
}

// WantForms lists the registered backends' URL forms as a message's hint:
// "postgres://… or sqlite://PATH".
func WantForms() string {
	return join(Kinds(), func(s Scheme) string { return s.Form })
}

// WantStandby lists the schemes of the backends that take a standby, as a
// message's hint: "postgres://".
func WantStandby() string {
	var with []Scheme
	for _, s := range Kinds() {
		if s.Standby {
			with = append(with, s)
		}
	}
	return join(with, func(s Scheme) string { return s.Names[0] + "://" })
}

func join[T any](xs []T, f func(T) string) string {
	if len(xs) == 0 {
		return "no store backend is linked in"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = f(x)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}
