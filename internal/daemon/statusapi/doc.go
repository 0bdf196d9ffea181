// Package statusapi is the daemon's HTTP status API: health and
// readiness probes, Prometheus metrics, the loop's status, its registry
// entries and drift report, and endpoints that ask for a pass, a full
// resync or a drift report now.
//
// Every response is JSON apart from /metrics. Malformed requests get a 4xx
// answer and a wrong method 405; a handler never takes the daemon down. With
// a token configured every endpoint but /healthz and /readyz requires
// "Authorization: Bearer TOKEN".
//
// Trust boundaries. Listen refuses a non-loopback address unless the
// handler requires a token. Without a token, every request whose Host is
// not a loopback name (localhost, 127.0.0.0/8, ::1), the configured listen
// host or the address the connection arrived on is refused with 421, so
// that a page of another site whose name was rebound to this address (DNS
// rebinding) cannot reach the API; with a token any Host is accepted (a
// Kubernetes Service name), since a rebound page cannot send the token. The endpoints that change something (POST
// /v1/reconcile, /v1/resync, /v1/drift) need "Content-Type:
// application/json", which a cross-site page cannot send without a CORS
// preflight this API never answers; anything else gets 415. Concurrent
// GET /v1/drift requests share one computation (one relist of the store).
package statusapi
