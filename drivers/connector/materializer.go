package connector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
)

// Defaults for Options.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxSpecBytes = 8 << 20
)

// MaxSpecBytesKey is the configuration key of Options.MaxSpecBytes;
// reasons name it.
const MaxSpecBytesKey = "connector.max_spec_bytes"

// Sentinel causes of invalid connectors (errors.Is).
var (
	ErrDisabled     = errors.New("connector disabled")
	ErrNoCredential = errors.New("credential has no usable value")
	// ErrAnswerTooLarge: upstream answered with more than MaxSpecBytes.
	ErrAnswerTooLarge = errors.New("upstream answer above the " + MaxSpecBytesKey + " cap")
)

// Options configure a Materializer. Zero values take the defaults.
type Options struct {
	// Logger; default discards. Credentials are never logged.
	Logger *slog.Logger
	// Transport is cloned for every client (default: http.DefaultTransport).
	Transport *http.Transport
	// Timeout bounds each upstream request of a materialization when the
	// body sets no providerConfig.timeout (default 10s). The loop's
	// apply.timeout (the ctx) bounds the whole materialization.
	Timeout time.Duration
	// MaxSpecBytes (connector.max_spec_bytes) caps what is read of an
	// upstream answer, the OpenAPI document or a probe's (default 8 MiB);
	// a larger answer holds the connector naming the cap, and the rest is
	// never read.
	MaxSpecBytes int64
	// Limits are the caps of a body (engine.max_body_bytes,
	// engine.max_refs), the loop's: zero fields mean their defaults.
	Limits metadata.Limits
	// Hosts is the host policy (connector.allow_hosts,
	// connector.deny_hosts; ParseHostPolicy); nil allows every host.
	Hosts *Hosts
}

// Materializer materializes connector entries into *Client instances. It
// is safe for concurrent use.
type Materializer struct {
	log       *slog.Logger
	transport *http.Transport
	timeout   time.Duration
	maxSpec   int64
	lim       metadata.Limits
	hosts     *Hosts
}

var _ reconcile.Materializer = (*Materializer)(nil)

// New returns a Materializer. It does no I/O.
func New(opts Options) *Materializer {
	m := &Materializer{log: opts.Logger, transport: opts.Transport, timeout: opts.Timeout, maxSpec: opts.MaxSpecBytes, lim: opts.Limits, hosts: opts.Hosts}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.transport == nil {
		m.transport = http.DefaultTransport.(*http.Transport)
	}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	if m.maxSpec <= 0 {
		m.maxSpec = DefaultMaxSpecBytes
	}
	return m
}

// Materialize validates d's body, builds a client with d.Secret and probes
// upstream (see the package documentation for the outcomes). It returns a
// *Client.
func (m *Materializer) Materialize(ctx context.Context, d reconcile.Desired) (registry.Instance, error) {
	name := d.Key
	if md := d.Metadata; md != nil {
		name = md.Name
	}
	spec, err := parseSpec(d.Body, m.lim)
	if err != nil {
		return nil, reconcile.Invalid(err, "%s", err.Error())
	}
	if !spec.Enabled {
		return nil, reconcile.Invalid(ErrDisabled, "connector disabled")
	}
	if err := checkSecret(spec, d.Secret); err != nil {
		return nil, err
	}
	transport := m.transport
	if !m.hosts.empty() {
		host, port := spec.BaseURL.Hostname(), portOf(spec.BaseURL)
		nameAllowed, err := m.hosts.checkName(host, port)
		if err != nil {
			return nil, reconcile.Invalid(err, "connector %s: upstream %s: %v", name, net.JoinHostPort(host, strconv.Itoa(port)), err)
		}
		transport = transport.Clone()
		transport.DialContext = m.hosts.dialer(nameAllowed)
	}
	c := newClient(name, spec, d.Secret, transport)
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = m.timeout
	}
	log := m.log.With(slog.String("kind", string(d.Kind)), slog.String("key", d.Key), slog.Int64("revision", d.Revision))
	if err := m.check(ctx, c, timeout, log); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.recheck = func(ctx context.Context) error { return m.probe(ctx, c, timeout, log) }
	return c, nil
}

func checkSecret(spec Spec, s secret.Secret) error {
	if spec.AuthType == metadata.AuthNone {
		return nil
	}
	if s.IsEmpty() {
		return reconcile.Invalid(ErrNoCredential, "credential %s is empty", spec.CredentialRef)
	}
	if spec.AuthType == metadata.AuthBasic {
		user, _, ok := strings.Cut(s.Reveal(), ":")
		if !ok || user == "" {
			return reconcile.Invalid(ErrNoCredential, "credential %s is not \"user:password\" as basic auth needs", spec.CredentialRef)
		}
	}
	return nil
}

// check fetches the OpenAPI document (openapi) and probes upstream.
func (m *Materializer) check(ctx context.Context, c *Client, timeout time.Duration, log *slog.Logger) error {
	s := c.spec
	if s.Provider == ProviderOpenAPI {
		doc, err := m.fetch(ctx, c, timeout, http.MethodGet, s.SpecURL, "spec "+redact.URL(s.SpecURL.String()), log)
		if err != nil {
			return err
		}
		if err := isOpenAPI(doc); err != nil {
			return reconcile.Invalid(err, "spec %s is not an OpenAPI document: %v", redact.URL(s.SpecURL.String()), err)
		}
		// Checked, not kept: 30 connectors of 8 MiB specs held 444 MB.
		if !s.HasProbe {
			return nil
		}
	}
	return m.probe(ctx, c, timeout, log)
}

// probe sends the connector's probe (an openapi connector without one
// fetches its document again, and keeps the one it has).
func (m *Materializer) probe(ctx context.Context, c *Client, timeout time.Duration, log *slog.Logger) error {
	s := c.spec
	if s.Provider == ProviderOpenAPI && !s.HasProbe {
		_, err := m.fetch(ctx, c, timeout, http.MethodGet, s.SpecURL, "spec "+redact.URL(s.SpecURL.String()), log)
		return err
	}
	u := s.BaseURL
	what := "probe " + s.ProbeMethod + " " + redact.URL(s.ProbePath)
	if s.HasProbe {
		ref, _ := url.Parse(s.ProbePath) // validated by ParseSpec
		u = joinURL(s.BaseURL, ref)
	} else {
		what = "probe GET " + redact.URL(u.String())
	}
	method := s.ProbeMethod
	if method == "" {
		method = http.MethodGet
	}
	_, err := m.fetch(ctx, c, timeout, method, u, what, log)
	return err
}

// fetch sends one authorized request and classifies its outcome; it
// returns the body of a 2xx answer.
func (m *Materializer) fetch(ctx context.Context, c *Client, timeout time.Duration, method string, u *url.URL, what string, log *slog.Logger) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, u.String(), nil)
	if err != nil {
		return nil, reconcile.Invalid(err, "%s: %v", what, err)
	}
	log.DebugContext(ctx, "connector request", slog.String("op", what), slog.String("auth", c.spec.AuthType))
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, ErrForeignOrigin):
			return nil, reconcile.Invalid(err, "%s: %v", what, err)
		case errors.Is(err, ErrHostRefused): // before any connection: says nothing of the port
			var he *net.OpError
			addr := u.Host
			if errors.As(err, &he) && he.Addr != nil {
				addr = he.Addr.String()
			}
			return nil, reconcile.Invalid(err, "%s: upstream %s: %v", what, addr, unwrapHostRefusal(err))
		case ctx.Err() != nil:
			return nil, reconcile.Transient(ctx.Err(), "%s: interrupted after %v: %v", what, time.Since(start).Round(time.Millisecond), ctx.Err())
		case rctx.Err() != nil:
			return nil, reconcile.Transient(rctx.Err(), "%s: timed out after %v", what, timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, reconcile.Transient(err, "%s: %v", what, err)
	}
	defer resp.Body.Close()
	log.DebugContext(ctx, "connector answer", slog.String("op", what), slog.Int("status", resp.StatusCode))
	if err := classifyStatus(what, resp.StatusCode); err != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, m.maxSpec+1))
	if err != nil {
		if rctx.Err() != nil {
			return nil, reconcile.Transient(err, "%s: timed out after %v reading the answer", what, timeout)
		}
		return nil, reconcile.Transient(err, "%s: read answer: %v", what, err)
	}
	if int64(len(b)) > m.maxSpec {
		return nil, reconcile.Invalid(ErrAnswerTooLarge, "%s: answer is above the %s cap (%s)", what, byteSize(m.maxSpec), MaxSpecBytesKey)
	}
	return b, nil
}

// byteSize prints a cap for people: "8 MiB", "64 KiB", "1000 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// classifyStatus maps an upstream status to a failure (nil for 2xx).
func classifyStatus(what string, code int) error {
	cause := &StatusError{Op: what, Code: code}
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return reconcile.Refused(cause, "refused upstream: %d", code)
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return reconcile.Transient(cause, "%s", cause.Error())
	default:
		return reconcile.Invalid(cause, "%s", cause.Error())
	}
}

// String describes the client without its credential.
func (c *Client) String() string {
	return fmt.Sprintf("connector %s (%s %s, auth %s)", c.name, c.spec.Provider, redact.URL(c.spec.BaseURL.String()), c.spec.AuthType)
}

// GoString describes the client without its credential (%#v).
func (c *Client) GoString() string { return c.String() }

// portOf is a URL's port, or its scheme's default.
func portOf(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// unwrapHostRefusal is the policy's refusal inside a dial error.
func unwrapHostRefusal(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), ErrHostRefused.Error()) {
			return e
		}
	}
	return ErrHostRefused
}
