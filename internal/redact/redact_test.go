package redact_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/redact"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable":             "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://h/db?password=pw&x=1":                       "postgres://h/db?password=xxxxx&x=1",
		"postgres://h/db?x=1&sslpassword=pw":                    "postgres://h/db?x=1&sslpassword=xxxxx",
		"postgres://u:pw@[::1":                                  "postgres://u:xxxxx@[::1",
		"postgres://u:p#w@h/db":                                 "postgres://u:xxxxx@h/db",
		"postgres://u:p?w@h/db?password=q#f":                    "postgres://u:xxxxx@h/db?password=xxxxx#f",
		"https://hooks.test/x?token=t0k&channel=ops":            "https://hooks.test/x?token=xxxxx&channel=ops",
		"https://hooks.test/x?Access_Token=a&sig=s&key=k&k2=v":  "https://hooks.test/x?Access_Token=xxxxx&sig=xxxxx&key=xxxxx&k2=v",
		"https://h/x?client_secret=c&myToken=m&DB_PASSWORD=d":   "https://h/x?client_secret=xxxxx&myToken=xxxxx&DB_PASSWORD=xxxxx",
		"https://h/x?%70assword=p":                              "https://h/x?%70assword=xxxxx",
		"https://h/x?token":                                     "https://h/x?token",
		"sqlite://./demo/x.db":                                  "sqlite://./demo/x.db",
		"https://u@h/x":                                         "https://u@h/x",
		"":                                                      "",
		"not a url":                                             "not a url",
		"u:pw@h":                                                "u:xxxxx@h",
		"postgres://app:CANARY/PW1@127.0.0.1:56432/objectstack": "postgres://app:xxxxx@127.0.0.1:56432/objectstack",
		"postgres://app:a/b?c#d@h/db?sslmode=disable":           "postgres://app:xxxxx@h/db?sslmode=disable",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecrets(t *testing.T) {
	pw := "p@ss w/rd"
	msg := "connect postgres://u:p%40ss+w%2Frd@h failed: password p@ss w/rd rejected (p%40ss%20w%2Frd)"
	got := redact.Secrets(msg, pw, "")
	if strings.Contains(got, "ss w") || strings.Contains(got, "%40ss") {
		t.Fatalf("Secrets left the value: %q", got)
	}
	if got := redact.Secrets("nothing here", ""); got != "nothing here" {
		t.Fatal(got)
	}
}

func TestURLSecrets(t *testing.T) {
	got := redact.URLSecrets("postgres://u:pw@h/db?sslpassword=sp&sslmode=require")
	if len(got) != 2 || !(got[0] == "pw" && got[1] == "sp") {
		t.Fatalf("URLSecrets = %q", got)
	}
	if redact.URLSecrets("::bad") != nil {
		t.Fatal("unparseable URL gave secrets")
	}
}

// No input makes URL keep a password it was given in userinfo.
func FuzzURL(f *testing.F) {
	f.Add("postgres://u", "pw", "h/db?x=1")
	f.Add("https://u", "p#?w", "[::1")
	f.Fuzz(func(t *testing.T, head, pw, tail string) {
		if len(pw) < 4 || strings.Contains(redact.Placeholder, pw) || strings.ContainsAny(pw, "@/:") || strings.Contains(head, "@") || strings.Contains(head+tail, pw) {
			return
		}
		for _, c := range []byte(pw + tail) {
			if c < 0x21 || c > 0x7e || c == '%' {
				return // re-encoding could make the password's text appear
			}
		}
		scheme, ok := strings.CutSuffix(head, "://u")
		if !ok || !validScheme(scheme) {
			return
		}
		s := head + ":" + pw + "@" + tail
		out := redact.URL(s)
		if u, err := url.PathUnescape(out); err == nil {
			out = u // URL may re-encode the tail
		}
		if strings.Contains(out, pw) {
			t.Fatalf("URL(%q) = %q keeps the password", s, redact.URL(s))
		}
	})
}

func ExampleURL() {
	fmt.Println(redact.URL("postgres://app:hunter2@db:5432/app?sslmode=require&sslpassword=k"))
	// Output: postgres://app:xxxxx@db:5432/app?sslmode=require&sslpassword=xxxxx
}

func validScheme(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

func TestURLCases(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db":                         "postgres://u@h/db",
		"postgres://h/db?password=pw&x=1":           "postgres://h/db?password=xxxxx&x=1",
		"postgres://u:pw@[::1":                      "postgres://u:xxxxx@[::1",
		"sqlite:///a/b.db":                          "sqlite:///a/b.db",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}
