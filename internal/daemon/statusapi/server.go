package statusapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/objectstack-fleet/reconciler/internal/coalesce"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Backend is the loop as the API sees it; *reconcile.Reconciler satisfies it.
type Backend interface {
	Status() reconcile.Status
	Registries() registry.View
	Synced() <-chan struct{}
	Reconcile()
	Resync()
	Drift(ctx context.Context) (reconcile.DriftReport, error)
}

// Options configure the handler.
type Options struct {
	Backend Backend
	// Token, when not empty, is required as a bearer token on every
	// endpoint but /healthz and /readyz.
	Token string
	// Gatherer serves /metrics (nil: 404).
	Gatherer prometheus.Gatherer
	// WriteDrift writes a drift report now (POST /v1/drift); nil: 405.
	WriteDrift func(ctx context.Context) (reconcile.DriftReport, error)
	// Version and Store (redacted) are added to /v1/status.
	Version string
	Store   string
	// Logger; default discards.
	Logger *slog.Logger
	// Replica, if set, adds the replica state of each item to /v1/items
	// and a summary to /v1/status.
	Replica Replica
	// Fleet, if set, reads the fleet's heartbeats for the status page.
	Fleet func(ctx context.Context) (fleet.View, error)
	// Control, if set, serves GET /v1/item, POST /v1/item/retry and
	// /v1/items?root_causes=true.
	Control Control
	// Warnings, if set, returns what /v1/status warns about beside the
	// loop's state (a replica id shared with another process).
	Warnings func() []string
	// Guard, if set, serves GET /v1/guard and POST /v1/guard/release
	// (*reconcile.Reconciler is one).
	Guard Guard
}

// Guard is the eviction guard as the API sees it.
type Guard interface {
	Guard() reconcile.GuardStatus
	ReleaseGuard()
}

// Released is the JSON of POST /v1/guard/release.
type Released struct {
	Requested string `json:"requested"` // "release"
	// Held is the number of guarded evictions the release covers: they
	// are applied at the daemon's next pass.
	Held int `json:"held"`
}

// Replica is what the API shows of the replica beside the sidecar.
type Replica interface {
	// ItemReplica returns an entry's replica state (nil: none).
	ItemReplica(kind registry.Kind, key string) *registry.ReplicaStatus
	// ReplicaSummary returns the replica's summary (nil: none).
	ReplicaSummary() *registry.ReplicaReport
}

// StatusBody is the JSON of GET /v1/status.
type StatusBody struct {
	reconcile.Status
	Version string `json:"version"`
	Store   string `json:"store"`
	// ReplicaSync summarizes the replica's convergence (absent: no
	// replica driven). Its JSON name leaves "replica" to the replica id.
	ReplicaSync *registry.ReplicaReport `json:"replica_sync,omitempty"`
	// Warnings are problems of the sidecar's setup (absent: none).
	Warnings []string `json:"warnings,omitempty"`
}

// Item is one entry of GET /v1/items.
type Item struct {
	registry.Entry
	// Replica is the entry's state on the replica beside the sidecar
	// (absent: no replica driven).
	Replica *registry.ReplicaStatus `json:"replica,omitempty"`
}

// Accepted is the JSON of POST /v1/reconcile and /v1/resync (202: the
// pass or relist is asked for, not done).
type Accepted struct {
	Requested string `json:"requested"` // "reconcile" or "resync"
}

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error string `json:"error"`
}

// driftTimeout bounds one shared drift computation of GET /v1/drift: it
// goes on when the caller that started it leaves, since others wait for it.
const driftTimeout = 60 * time.Second

// Handler is the API's handler.
type Handler struct {
	o     Options
	next  http.Handler
	drift coalesce.Call[reconcile.DriftReport]
}

// NewHandler returns the API's handler.
func NewHandler(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.Handle("GET /{$}", h.pageAuth(http.HandlerFunc(h.page)))
	mux.Handle("GET /item", h.pageAuth(http.HandlerFunc(h.itemPage)))
	mux.Handle("GET /metrics", h.auth(h.metrics()))
	mux.Handle("GET /v1/status", h.auth(http.HandlerFunc(h.status)))
	mux.Handle("GET /v1/items", h.auth(http.HandlerFunc(h.items)))
	mux.Handle("GET /v1/item", h.auth(http.HandlerFunc(h.item)))
	mux.Handle("POST /v1/item/retry", h.auth(h.mutating(h.retry)))
	mux.Handle("POST /v1/reconcile", h.auth(h.mutating(h.reconcile)))
	mux.Handle("POST /v1/resync", h.auth(h.mutating(h.resync)))
	mux.Handle("GET /v1/drift", h.auth(http.HandlerFunc(h.getDrift)))
	mux.Handle("POST /v1/drift", h.auth(h.mutating(h.writeDrift)))
	if o.Guard != nil {
		mux.Handle("GET /v1/guard", h.auth(http.HandlerFunc(h.guard)))
		mux.Handle("POST /v1/guard/release", h.auth(h.mutating(h.releaseGuard)))
	}
	h.next = h.recover(h.checkHost(mux))
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.next.ServeHTTP(w, r) }

// RequiresToken reports whether the handler asks for a bearer token.
func (h *Handler) RequiresToken() bool { return h.o.Token != "" }

// listenHostKey carries the configured listen host (see Listen) in the
// request's context.
type listenHostKey struct{}

// checkHost, without a token, refuses a request whose Host is not a
// loopback name, the configured listen host or the address the connection
// arrived on: a page of another site whose name was rebound to this
// address (DNS rebinding) sends its own name. It also refuses a request
// that came in on a non-loopback address when no token is configured.
// With a token any Host is accepted (a Kubernetes Service name, say): the
// token is the boundary, and a rebound page cannot send it (a browser
// keeps credentials per origin).
func (h *Handler) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local := localIP(r.Context())
		if h.o.Token == "" && !h.allowedHost(r.Context(), r.Host, local) {
			writeError(w, http.StatusMisdirectedRequest, "request Host is not this daemon's address (a loopback name or the status.listen address)")
			return
		}
		if h.o.Token == "" && local != nil && !local.IsLoopback() {
			writeError(w, http.StatusForbidden, "no token is configured: the API answers on loopback only (set status.token_env)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) allowedHost(ctx context.Context, hostport string, local net.IP) bool {
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || (local != nil && ip.Equal(local))
	}
	listen, _ := ctx.Value(listenHostKey{}).(string)
	return listen != "" && strings.EqualFold(strings.TrimSuffix(listen, "."), host)
}

// localIP returns the IP the request's connection arrived on (nil when the
// handler is not served by an http.Server).
func localIP(ctx context.Context) net.IP {
	addr, _ := ctx.Value(http.LocalAddrContextKey).(net.Addr)
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP
	}
	return nil
}

// mutating guards an endpoint that changes something: it needs a JSON
// content type, which a cross-site form or fetch cannot send without a
// CORS preflight this API never answers.
func (h *Handler) mutating(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "POST needs \"Content-Type: application/json\"")
			return
		}
		next(w, r)
	})
}

func (h *Handler) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.o.Logger.ErrorContext(r.Context(), "status api handler panicked", slog.String("path", r.URL.Path), slog.Any("panic", v))
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) auth(next http.Handler) http.Handler {
	if h.o.Token == "" {
		return next
	}
	want := []byte("Bearer " + h.o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="reconciler"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-h.o.Backend.Synced():
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	default:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not synced yet"})
	}
}

func (h *Handler) metrics() http.Handler {
	if h.o.Gatherer == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(h.o.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (h *Handler) status(w http.ResponseWriter, _ *http.Request) {
	body := StatusBody{Status: h.o.Backend.Status(), Version: h.o.Version, Store: h.o.Store}
	if h.o.Replica != nil {
		body.ReplicaSync = h.o.Replica.ReplicaSummary()
	}
	if h.o.Warnings != nil {
		body.Warnings = h.o.Warnings()
	}
	writeJSON(w, http.StatusOK, body)
}

// items serves GET /v1/items: the entries the filters select, in kind
// (apply) order then key, a page at a time with limit (a full page links
// the next one: Link rel="next", after=KIND/KEY of its last item); or,
// with root_causes=true, the held entries collapsed onto what holds them.
func (h *Handler) items(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed query string")
		return
	}
	rq, keep, rootCauses, err := parseItemsQuery(q, h.replicaStateFunc())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if rootCauses {
		if h.o.Control == nil {
			writeError(w, http.StatusNotFound, "root causes are not enabled")
			return
		}
		writeJSON(w, http.StatusOK, h.o.Control.RootCauses())
		return
	}
	entries := selectPage(h.o.Backend.Registries(), rq, keep)
	items := make([]Item, len(entries))
	for i, e := range entries {
		items[i] = h.listItem(e)
	}
	if rq.Limit > 0 && len(entries) == rq.Limit {
		w.Header().Set("Link", nextLink(r, entries[len(entries)-1]))
	}
	writeJSON(w, http.StatusOK, items)
}

func (h *Handler) guard(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.o.Guard.Guard())
}

// releaseGuard releases this sidecar's guarded evictions (the fleet's
// release is `reconciler guard release --store.url`).
func (h *Handler) releaseGuard(w http.ResponseWriter, r *http.Request) {
	held := h.o.Guard.Guard().Held
	h.o.Guard.ReleaseGuard()
	h.o.Logger.WarnContext(r.Context(), "guard release asked through the API", slog.Int("held", held))
	writeJSON(w, http.StatusAccepted, Released{Requested: "release", Held: held})
}

func (h *Handler) reconcile(w http.ResponseWriter, _ *http.Request) {
	h.o.Backend.Reconcile()
	writeJSON(w, http.StatusAccepted, Accepted{Requested: "reconcile"})
}

func (h *Handler) resync(w http.ResponseWriter, _ *http.Request) {
	h.o.Backend.Resync()
	writeJSON(w, http.StatusAccepted, Accepted{Requested: "resync"})
}

// getDrift serves GET /v1/drift; concurrent callers share one computation
// (one relist of the store).
func (h *Handler) getDrift(w http.ResponseWriter, r *http.Request) {
	rep, err := h.drift.Do(r.Context(), func(ctx context.Context) (reconcile.DriftReport, error) {
		ctx, cancel := context.WithTimeout(ctx, driftTimeout)
		defer cancel()
		return h.o.Backend.Drift(ctx)
	})
	if err != nil {
		h.o.Logger.WarnContext(r.Context(), "drift report failed", slog.String("error", err.Error()))
		writeError(w, http.StatusServiceUnavailable, "drift report failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (h *Handler) writeDrift(w http.ResponseWriter, r *http.Request) {
	if h.o.WriteDrift == nil {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "writing drift reports is not enabled")
		return
	}
	rep, err := h.o.WriteDrift(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "drift report failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}

// Server serves a handler on a bound listener.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// ErrNoToken is returned by Listen for a non-loopback address without a
// token.
var ErrNoToken = errors.New("a non-loopback address needs a token (status.token_env)")

// TokenRequirer is a handler that may require a bearer token (Handler is
// one): Listen serves it on a non-loopback address only if it does.
type TokenRequirer interface {
	RequiresToken() bool
}

// Listen binds addr now, so that a busy or bad address fails startup
// before anything else has started. It refuses a non-loopback addr unless
// h is a TokenRequirer that requires a token. h learns addr's host, which it
// accepts as a request's Host besides loopback names.
func Listen(addr string, h http.Handler) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if th, ok := h.(TokenRequirer); !config.LoopbackHost(host) && (!ok || !th.RequiresToken()) {
		return nil, fmt.Errorf("listen on %s: %w", addr, ErrNoToken)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	ln = limitListener(ln, MaxConns)
	return &Server{ln: ln, srv: &http.Server{
		Handler: h,
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), listenHostKey{}, host)
		},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}}, nil
}

// Addr returns the bound address (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close releases the listener of a server that will not Run.
func (s *Server) Close() error { return s.ln.Close() }

// Run serves until ctx ends, then shuts down within a few seconds.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("status api: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("status api shutdown: %w", err)
	}
	return nil
}

// BearerHeader returns the Authorization header value for token.
func BearerHeader(token string) string { return "Bearer " + strings.TrimSpace(token) }

// MaxConns bounds the status API's open connections: past it, new ones
// wait in the kernel's accept queue (taking no descriptor of the daemon's)
// until one closes, so idle connections cannot exhaust the descriptors
// the daemon's pools and upstreams need. Idle ones are closed after the
// header timeout (10s) or the keep-alive idle timeout (30s).
const MaxConns = 256

// limitListener accepts at most n connections open at once.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limited{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limited struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limited) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
