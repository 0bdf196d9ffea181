// Package connector materializes connectors: sys_metadata items of type
// 'connector'. Materializing one builds an HTTP client from the
// body and the resolved credential and probes upstream; only a client that
// upstream accepted becomes live.
//
// # Body
//
// The body is
//
//	{"provider": "rest" | "openapi",
//	 "providerConfig": {"baseUrl": "https://api.example.test/v1",
//	                    "probe": {"method": "GET", "path": "/health"},
//	                    "specUrl": "/openapi.json",  // openapi only
//	                    "timeout": "5s"},
//	 "auth": {"type": "bearer" | "api-key" | "basic" | "none",
//	          "credentialRef": "crm-token",
//	          "header": "X-API-Key"},                   // api-key only
//	 "enabled": true}
//
// The credential value is sent as "Authorization: Bearer <value>" (bearer),
// as the value of auth.header, default X-API-Key (api-key), or as HTTP basic
// authentication (basic), in which case the value is "user:password": the
// user name is everything before the first colon.
//
// # Probe and outcomes
//
// The probe is providerConfig.probe (method defaults to GET, path is
// relative to baseUrl); a rest connector without a probe is probed with
// GET baseUrl. An openapi connector also fetches specUrl (absolute, or
// relative to baseUrl) with the credential and requires a JSON or YAML
// document with an "openapi" member.
//
// Outcomes: 2xx → live; 401/403 → [reconcile.Refused] "refused upstream:
// 401"; 408, 429, 5xx, network failures and timeouts →
// [reconcile.Transient]; other statuses and bad bodies → [reconcile.Invalid]
// naming the fault; an unknown provider → reconcile.Invalid, and nothing
// is sent anywhere.
//
// # Where the credential goes
//
// The credential is only ever sent to the origin (scheme, host and port)
// of baseUrl. A probe path or specUrl outside that origin — an absolute
// URL elsewhere, "//other.host/x", or http where baseUrl is https — holds
// the connector (reconcile.Invalid wrapping [ErrForeignOrigin], the reason
// naming the member and the origin) and nothing is fetched. [Client.Do] and
// [Client.NewRequest] refuse other origins the same way, and redirects are
// followed only within the origin: a redirect elsewhere is the answer
// (a 3xx, held as invalid), never followed. URLs in reasons and logs are
// redacted (internal/redact).
package connector
