// Package redact is the one place that hides secrets in text meant for
// people: URLs (the password of their userinfo and query parameters such
// as password, sslpassword, token, secret, key, access_token or sig) and
// known secret values inside driver messages.
//
// Every URL the daemon prints — in logs, errors, the status API, drift
// reports and CLI output — goes through URL first.
package redact
