package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/secret"
)

// ErrClosed is returned by Client.Do after Close.
var ErrClosed = errors.New("connector client closed")

// Client is a materialized connector: an HTTP client for one upstream that
// applies the connector's auth to every request. It is the connector
// registry's live instance and is safe for concurrent use.
type Client struct {
	name      string
	spec      Spec
	secret    secret.Secret
	transport *http.Transport
	http      *http.Client
	closed    atomic.Bool
	// recheck probes upstream again as materializing did (Revalidate).
	recheck func(ctx context.Context) error
}

var _ reconcile.Revalidator = (*Client)(nil)

// Revalidate probes upstream again, as materializing did: a refusal (a
// token revoked upstream) is a reconcile.Refused error, a transient
// failure a reconcile.Transient one.
func (c *Client) Revalidate(ctx context.Context) error {
	if c.recheck == nil {
		return nil
	}
	return c.recheck(ctx)
}

func newClient(name string, spec Spec, secret secret.Secret, base *http.Transport) *Client {
	t := base.Clone()
	c := &Client{name: name, spec: spec, secret: secret, transport: t}
	c.http = &http.Client{Transport: t, CheckRedirect: c.checkRedirect}
	return c
}

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 10

// checkRedirect follows redirects only within the origin of baseUrl, so
// that the credential never travels anywhere else: a redirect elsewhere
// is returned as the answer (a 3xx), not followed.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects || Origin(req.URL) != Origin(c.spec.BaseURL) {
		return http.ErrUseLastResponse
	}
	return nil
}

// Name returns the connector's name.
func (c *Client) Name() string { return c.name }

// Spec returns the connector's validated body.
func (c *Client) Spec() Spec { return c.spec }

// BaseURL returns a copy of the connector's baseUrl.
func (c *Client) BaseURL() *url.URL { u := *c.spec.BaseURL; return &u }

// NewRequest returns a request for path relative to baseUrl ("/accounts?
// limit=5") or for an absolute URL within baseUrl's origin; another origin
// is refused with ErrForeignOrigin.
func (c *Client) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	ref, err := url.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("connector %s: parse request path: %w", c.name, err)
	}
	u := joinURL(c.spec.BaseURL, ref)
	if err := c.checkOrigin(u); err != nil {
		return nil, err
	}
	return http.NewRequestWithContext(ctx, method, u.String(), body)
}

// Do sends req upstream with the connector's auth applied. A request whose
// URL has no host is taken relative to baseUrl; one for another origin
// than baseUrl's is refused with ErrForeignOrigin and never sent, and so
// is a Host header naming another host. req itself is not modified. It
// returns ErrClosed after Close.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	r := req.Clone(req.Context())
	if r.URL.Host == "" {
		r.URL = joinURL(c.spec.BaseURL, r.URL)
		r.Host = ""
	}
	if err := c.checkOrigin(r.URL); err != nil {
		return nil, err
	}
	if r.Host != "" && !strings.EqualFold(r.Host, r.URL.Host) {
		return nil, fmt.Errorf("connector %s: Host header %q: %w", c.name, r.Host, ErrForeignOrigin)
	}
	c.authorize(r)
	return c.http.Do(r)
}

// checkOrigin refuses u when it is outside baseUrl's origin.
func (c *Client) checkOrigin(u *url.URL) error {
	if Origin(u) != Origin(c.spec.BaseURL) {
		return fmt.Errorf("connector %s: %s: %w (%s)", c.name, redact.URL(u.String()), ErrForeignOrigin, Origin(c.spec.BaseURL))
	}
	return nil
}

// authorize puts the credential on r.
func (c *Client) authorize(r *http.Request) {
	v := c.secret.Reveal()
	switch c.spec.AuthType {
	case metadata.AuthBearer:
		r.Header.Set("Authorization", "Bearer "+v)
	case metadata.AuthAPIKey:
		r.Header.Set(c.spec.Header, v)
	case metadata.AuthBasic:
		user, pass, _ := strings.Cut(v, ":")
		r.SetBasicAuth(user, pass)
	}
}

// Close releases the client's idle connections; Do fails afterwards.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.transport.CloseIdleConnections()
	return nil
}

// StatusError is the cause of a failure due to an upstream status.
type StatusError struct {
	Op   string // "probe GET /health", "spec /openapi.json"
	Code int
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s answered %d", e.Op, e.Code) }

// isOpenAPI reports whether doc is a JSON or YAML document with an
// "openapi" member.
func isOpenAPI(doc []byte) error {
	var j map[string]json.RawMessage
	if err := json.Unmarshal(doc, &j); err == nil {
		var v string
		if raw, ok := j["openapi"]; !ok {
			return errors.New("missing the openapi member")
		} else if json.Unmarshal(raw, &v) != nil || v == "" {
			return errors.New("its openapi member is not a version string")
		}
		return nil
	}
	return isOpenAPIYAML(doc)
}
