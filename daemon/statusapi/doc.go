// Package statusapi is the daemon's HTTP status API (DESIGN §7): health and
// readiness probes, Prometheus metrics, the loop's status, its registry
// entries and drift report, and endpoints that ask for a pass, a full
// resync or a drift report now.
//
// Every response is JSON apart from /metrics. Malformed requests get a 4xx
// answer and a wrong method 405; a handler never takes the daemon down. With
// a token configured every endpoint but /healthz and /readyz requires
// "Authorization: Bearer TOKEN".
package statusapi
