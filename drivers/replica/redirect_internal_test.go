package replica

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// The replica's token never follows a redirect to another origin, not
// even another port of the same host (the default client keeps
// Authorization there); a redirect within the origin is followed.
func TestReplicaRedirectStaysAtOrigin(t *testing.T) {
	var leaked atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
	}))
	defer other.Close()
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
		case "/home":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer replica.Close()
	c := &http.Client{CheckRedirect: sameOrigin}
	for path, want := range map[string]int{"/away": http.StatusFound, "/home": http.StatusOK} {
		req, _ := http.NewRequest("GET", replica.URL+path, nil)
		req.Header.Set("Authorization", "Bearer token")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the token reached another port %d times", n)
	}
}
