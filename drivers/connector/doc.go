// Package connector materializes connectors: sys_metadata items of type
// 'connector' (DESIGN §6). Materializing one builds an HTTP client from the
// body and the resolved credential and probes upstream; only a client that
// upstream accepted becomes live.
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
// The probe is providerConfig.probe (method defaults to GET, path is
// relative to baseUrl); a rest connector without a probe is probed with
// GET baseUrl. An openapi connector also fetches specUrl (absolute, or
// relative to baseUrl) with the credential and requires a JSON or YAML
// document with an "openapi" member.
//
// Outcomes: 2xx → live; 401/403 → reconcile.Refused "refused upstream: 401";
// 408, 429, 5xx, network failures and timeouts → reconcile.Transient; other
// statuses and bad bodies → reconcile.Invalid naming the fault; an unknown
// provider → reconcile.Invalid, and nothing is sent anywhere.
//
// Redirects are followed only within the same scheme and host, so that a
// credential never leaves for another origin.
package connector
