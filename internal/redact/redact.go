package redact

import (
	"net/url"
	"strings"
)

// Placeholder replaces every hidden value.
const Placeholder = "xxxxx"

// sensitiveParams are query parameter names (lower case) whose values are
// hidden. Names containing "password", "secret" or "token" are hidden too.
var sensitiveParams = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "pass": true, "sslpassword": true,
	"token": true, "access_token": true, "refresh_token": true, "id_token": true,
	"secret": true, "client_secret": true,
	"key": true, "api_key": true, "apikey": true, "api-key": true,
	"sig": true, "signature": true, "x-amz-signature": true, "x-amz-credential": true,
	"auth": true, "authorization": true, "credential": true, "credentials": true,
}

// SensitiveParam reports whether a query parameter of this name carries a
// secret (case-insensitive).
func SensitiveParam(name string) bool {
	n := strings.ToLower(name)
	if hide, ok := sensitiveParams[n]; ok {
		return hide
	}
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// URL returns s with the password of its userinfo and the values of
// sensitive query parameters replaced by Placeholder; the rest, including
// the order of the parameters, is kept. It copes with strings that do not
// parse as URLs: a password in "scheme://user:pw@host/…" is still cut, even
// when it holds characters such as "#" or "?".
func URL(s string) string {
	p, err := url.Parse(s)
	if err != nil || p.Opaque != "" || p.Host == "" || p.User == nil && rawUserinfo(s) {
		// Not a URL url.Parse understands the way a driver would, or a
		// password holding "#" or "?" that cut the authority short.
		return userinfo(s)
	}
	changed := false
	if p.User != nil {
		if _, has := p.User.Password(); has {
			p.User = url.UserPassword(p.User.Username(), Placeholder)
			changed = true
		}
	}
	if q := Query(p.RawQuery); q != p.RawQuery {
		p.RawQuery = q
		changed = true
	}
	if !changed {
		return s
	}
	return p.String()
}

// Query returns a raw query string with the values of sensitive
// parameters replaced by Placeholder, keeping the rest as it is.
func Query(raw string) string {
	if raw == "" {
		return raw
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if hasValue && SensitiveParam(name) {
			parts[i] = k + "=" + Placeholder
		}
	}
	return strings.Join(parts, "&")
}

// rawUserinfo reports whether s has an "@" between "://" and the first "/".
func rawUserinfo(s string) bool {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return false
	}
	if end := strings.IndexByte(rest, '/'); end >= 0 {
		rest = rest[:end]
	}
	return strings.Contains(rest, "@")
}

// userinfo cuts the password out of an unparseable
// "scheme://user:pw@host/path": from the first ":" of the userinfo to its
// last "@", and hides sensitive query parameters. The password may hold a
// "/", "?" or "#" (what made the URL unparseable), so the userinfo is not
// taken to end at any of them: a path or query with an "@" is
// over-redacted rather than a password shown.
func userinfo(u string) string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		rest = u
	}
	start := len(u) - len(rest)
	end := len(rest)
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
			u = u[:start+colon+1] + Placeholder + u[start+at:]
			start += colon + 1 + len(Placeholder)
		}
	}
	q := strings.IndexByte(u[start:], '?')
	if q < 0 {
		return u
	}
	q += start
	query, frag, hasFrag := strings.Cut(u[q+1:], "#")
	out := u[:q+1] + Query(query)
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// Secrets returns msg with every occurrence of each non-empty secret, as
// is and in its URL-escaped forms, replaced by Placeholder. It is for
// driver messages that might echo a password they were given.
func Secrets(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s == "" {
			continue
		}
		msg = strings.ReplaceAll(msg, s, Placeholder)
		q := url.QueryEscape(s)
		for _, form := range []string{q, strings.ReplaceAll(q, "+", "%20"), url.PathEscape(s)} {
			msg = strings.ReplaceAll(msg, form, Placeholder)
		}
	}
	return msg
}

// URLSecrets returns the secrets in a URL (its userinfo password and the
// values of sensitive query parameters), so that messages quoting them can
// be passed through Secrets.
func URLSecrets(s string) []string {
	p, err := url.Parse(s)
	if err != nil {
		return nil
	}
	var out []string
	if p.User != nil {
		if pw, ok := p.User.Password(); ok && pw != "" {
			out = append(out, pw)
		}
	}
	for k, vs := range p.Query() {
		if SensitiveParam(k) {
			for _, v := range vs {
				if v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out
}
