package connector

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/metadata"
)

// The providers.
const (
	ProviderREST    = "rest"
	ProviderOpenAPI = "openapi"
)

// DefaultAPIKeyHeader is the header an api-key credential is sent in when
// auth.header is not set.
const DefaultAPIKeyHeader = "X-API-Key"

// Spec is a connector body, decoded and validated.
type Spec struct {
	Provider string
	BaseURL  *url.URL
	// ProbeMethod and ProbePath are the probe ("" path: baseUrl itself).
	ProbeMethod string
	ProbePath   string
	HasProbe    bool
	// SpecURL is the OpenAPI document's address (openapi only).
	SpecURL *url.URL
	// Timeout bounds each upstream request of materialization (0: default).
	Timeout time.Duration
	// AuthType is one of metadata.Auth*; CredentialRef and Header go
	// with it.
	AuthType      string
	CredentialRef string
	Header        string
	Enabled       bool
}

// ParseSpec validates a connector body under the default caps of
// metadata.Limits. Faults name the member ("providerConfig.baseUrl is
// required", `unknown provider "mcp"`) and wrap metadata.ErrInvalid.
func ParseSpec(body []byte) (Spec, error) { return parseSpec(body, metadata.Limits{}) }

// parseSpec is ParseSpec under the caps lim.
func parseSpec(body []byte, lim metadata.Limits) (Spec, error) {
	root, err := metadata.ReadBody(body, "body")
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	if s.Provider, err = root.Required("provider"); err != nil {
		return Spec{}, err
	}
	if s.Provider != ProviderREST && s.Provider != ProviderOpenAPI {
		return Spec{}, metadata.Faultf("", "unknown provider %q", s.Provider)
	}
	enabled, set, err := root.Bool("enabled")
	if err != nil {
		return Spec{}, err
	}
	s.Enabled = enabled || !set

	pc, ok, err := root.Object("providerConfig")
	if err != nil {
		return Spec{}, err
	}
	if !ok {
		return Spec{}, metadata.Faultf("providerConfig", "is required")
	}
	base, err := pc.Required("baseUrl")
	if err != nil {
		return Spec{}, err
	}
	if s.BaseURL, err = parseHTTPURL(base, nil, pc.Path("baseUrl")); err != nil {
		return Spec{}, err
	}
	probe, ok, err := pc.Object("probe")
	if err != nil {
		return Spec{}, err
	}
	if ok {
		s.HasProbe = true
		if s.ProbeMethod, _, err = probe.String("method"); err != nil {
			return Spec{}, err
		}
		if s.ProbeMethod == "" {
			s.ProbeMethod = http.MethodGet
		}
		s.ProbeMethod = strings.ToUpper(s.ProbeMethod)
		switch s.ProbeMethod {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			return Spec{}, metadata.Faultf(probe.Path("method"), "must be GET, HEAD or OPTIONS")
		}
		if s.ProbePath, _, err = probe.String("path"); err != nil {
			return Spec{}, err
		}
		u, err := parseHTTPURL(s.ProbePath, s.BaseURL, probe.Path("path"))
		if err != nil {
			return Spec{}, err
		}
		if err := sameOriginAs(u, s.BaseURL, probe.Path("path"), pc.Path("baseUrl")); err != nil {
			return Spec{}, err
		}
	}
	if s.Timeout, _, err = pc.Duration("timeout"); err != nil {
		return Spec{}, err
	}
	spec, ok, err := pc.String("specUrl")
	if err != nil {
		return Spec{}, err
	}
	if s.Provider == ProviderOpenAPI {
		if !ok {
			return Spec{}, metadata.Faultf(pc.Path("specUrl"), "is required for provider openapi")
		}
		if s.SpecURL, err = parseHTTPURL(spec, s.BaseURL, pc.Path("specUrl")); err != nil {
			return Spec{}, err
		}
		if err := sameOriginAs(s.SpecURL, s.BaseURL, pc.Path("specUrl"), pc.Path("baseUrl")); err != nil {
			return Spec{}, err
		}
	}

	// Which credential a connector uses is a metadata rule: one home for
	// it, shared with the loop that resolves the credential.
	if err := lim.CheckBody(int64(len(body))); err != nil {
		return Spec{}, err
	}
	c, err := root.Connector()
	if err != nil {
		return Spec{}, err
	}
	s.AuthType, s.CredentialRef = c.AuthType, c.CredentialRef
	if s.AuthType == metadata.AuthAPIKey {
		auth, _, err := root.Object("auth")
		if err != nil {
			return Spec{}, err
		}
		if s.Header, _, err = auth.String("header"); err != nil {
			return Spec{}, err
		}
		if s.Header == "" {
			s.Header = DefaultAPIKeyHeader
		}
		if !validHeaderName(s.Header) {
			return Spec{}, metadata.Faultf(auth.Path("header"), "is not a valid header name")
		}
	}
	return s, nil
}

// parseHTTPURL parses s as an http(s) URL, relative to base when base is
// not nil.
func parseHTTPURL(s string, base *url.URL, path string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, metadata.Faultf(path, "is not a valid URL")
	}
	if base != nil {
		u = joinURL(base, u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, metadata.Faultf(path, "must be an absolute http or https URL")
	}
	if u.User != nil {
		return nil, metadata.Faultf(path, "must not hold credentials (use auth.credentialRef)")
	}
	return u, nil
}

// ErrForeignOrigin is the cause of a connector whose probe or spec URL,
// or of a request, outside the origin of its baseUrl: the credential is
// only ever sent to that origin, so such a URL is never fetched.
var ErrForeignOrigin = errors.New("outside the origin of baseUrl")

// Origin returns u's origin, "scheme://host:port" with the host in lower
// case and the scheme's default port made explicit.
func Origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// sameOriginAs refuses u, the member at path, when its origin is not
// base's (the member at basePath).
func sameOriginAs(u, base *url.URL, path, basePath string) error {
	if Origin(u) == Origin(base) {
		return nil
	}
	return metadata.FaultOf(ErrForeignOrigin, path, "%s is outside the origin of %s (%s): a credential is only sent there, so it is not fetched",
		redact.URL(u.String()), basePath, Origin(base))
}

// joinURL resolves ref against base, treating a rooted ref path as
// relative to base's path, so that baseUrl "https://h/api/v1" and probe
// path "/health" give "https://h/api/v1/health". An absolute ref is kept;
// a scheme-relative one ("//host/x") takes base's scheme.
func joinURL(base, ref *url.URL) *url.URL {
	if ref.IsAbs() {
		return ref
	}
	if ref.Host != "" {
		u := *ref
		u.Scheme = base.Scheme
		return &u
	}
	u := *base
	if ref.Path != "" {
		u.Path = strings.TrimSuffix(base.Path, "/") + "/" + strings.TrimPrefix(ref.Path, "/")
		u.RawPath = ""
	}
	if ref.RawQuery != "" {
		u.RawQuery = ref.RawQuery
	}
	u.Fragment = ""
	return &u
}

func validHeaderName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return h != "" && !strings.EqualFold(h, "Host") && !strings.EqualFold(h, "Content-Length")
}
