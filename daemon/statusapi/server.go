package statusapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Backend is the loop as the API sees it; *reconcile.Reconciler satisfies it.
type Backend interface {
	Status() reconcile.Status
	Registries() *registry.Set
	Synced() <-chan struct{}
	Trigger()
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
}

// Replica is what the API shows of the replica beside the sidecar.
type Replica interface {
	// ItemReplica returns an entry's replica state (nil: none).
	ItemReplica(kind registry.Kind, key string) any
	// ReplicaSummary returns the replica's summary (nil: none).
	ReplicaSummary() any
}

// StatusBody is the JSON of GET /v1/status.
type StatusBody struct {
	reconcile.Status
	Version string `json:"version"`
	Store   string `json:"store"`
	// Replica summarizes the replica's state (absent: no replica driven).
	Replica any `json:"replica,omitempty"`
}

// Item is one entry of GET /v1/items.
type Item struct {
	registry.Entry
	// Replica is the entry's state on the replica beside the sidecar
	// (absent: no replica driven).
	Replica any `json:"replica,omitempty"`
}

// Triggered is the JSON of POST /v1/reconcile and /v1/resync.
type Triggered struct {
	Requested string `json:"requested"` // "reconcile" or "resync"
}

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error string `json:"error"`
}

// NewHandler returns the API's handler.
func NewHandler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.Handle("GET /metrics", h.auth(h.metrics()))
	mux.Handle("GET /v1/status", h.auth(http.HandlerFunc(h.status)))
	mux.Handle("GET /v1/items", h.auth(http.HandlerFunc(h.items)))
	mux.Handle("POST /v1/reconcile", h.auth(http.HandlerFunc(h.reconcile)))
	mux.Handle("POST /v1/resync", h.auth(http.HandlerFunc(h.resync)))
	mux.Handle("GET /v1/drift", h.auth(http.HandlerFunc(h.drift)))
	mux.Handle("POST /v1/drift", h.auth(http.HandlerFunc(h.writeDrift)))
	return h.recover(mux)
}

type handler struct{ o Options }

func (h *handler) recover(next http.Handler) http.Handler {
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

func (h *handler) auth(next http.Handler) http.Handler {
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

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *handler) readyz(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-h.o.Backend.Synced():
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	default:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not synced yet"})
	}
}

func (h *handler) metrics() http.Handler {
	if h.o.Gatherer == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(h.o.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (h *handler) status(w http.ResponseWriter, _ *http.Request) {
	body := StatusBody{Status: h.o.Backend.Status(), Version: h.o.Version, Store: h.o.Store}
	if h.o.Replica != nil {
		body.Replica = h.o.Replica.ReplicaSummary()
	}
	writeJSON(w, http.StatusOK, body)
}

func (h *handler) items(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed query string")
		return
	}
	for name := range q {
		if name != "kind" && name != "state" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown parameter %q (want kind, state)", name))
			return
		}
	}
	var kind registry.Kind
	var state registry.State
	if s := q.Get("kind"); s != "" {
		if kind, err = registry.ParseKind(s); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if s := q.Get("state"); s != "" {
		if state, err = registry.ParseState(s); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	entries := h.o.Backend.Registries().List(kind, state)
	items := make([]Item, len(entries))
	for i, e := range entries {
		items[i] = Item{Entry: e}
		if h.o.Replica != nil {
			items[i].Replica = h.o.Replica.ItemReplica(e.Kind, e.Key)
		}
	}
	writeJSON(w, http.StatusOK, items)
}

func (h *handler) reconcile(w http.ResponseWriter, _ *http.Request) {
	h.o.Backend.Trigger()
	writeJSON(w, http.StatusAccepted, Triggered{Requested: "reconcile"})
}

func (h *handler) resync(w http.ResponseWriter, _ *http.Request) {
	h.o.Backend.Resync()
	writeJSON(w, http.StatusAccepted, Triggered{Requested: "resync"})
}

func (h *handler) drift(w http.ResponseWriter, r *http.Request) {
	rep, err := h.o.Backend.Drift(r.Context())
	if err != nil {
		h.o.Logger.WarnContext(r.Context(), "drift report failed", slog.String("error", err.Error()))
		writeError(w, http.StatusServiceUnavailable, "drift report failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (h *handler) writeDrift(w http.ResponseWriter, r *http.Request) {
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

// Listen binds addr now, so that a busy or bad address fails startup
// before anything else has started.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return &Server{ln: ln, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
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
