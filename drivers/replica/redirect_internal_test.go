package replica

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
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

// A bus flood of unique names keeps at most maxSeen observations; a name
// already seen is still updated.
func TestBusObservationsBounded(t *testing.T) {
	d := &Driver{seen: map[string]time.Time{}}
	now := time.Now()
	for i := range 3 * maxSeen {
		d.markSeen(fmt.Sprintf("datasource.mutated\x00n%d", i), now)
	}
	if len(d.seen) != maxSeen {
		t.Fatalf("%d observations kept, want the bound %d", len(d.seen), maxSeen)
	}
	later := now.Add(time.Second)
	d.markSeen("datasource.mutated\x00n0", later)
	if !d.seen["datasource.mutated\x00n0"].Equal(later) {
		t.Fatal("a known name was not updated at the bound")
	}
}

// An uptime that does not advance is no restart; one shorter than the
// time since the last answer is.
func TestBootedSince(t *testing.T) {
	prev := time.Now().Add(-5 * time.Second)
	for _, c := range []struct {
		up   float64
		want bool
	}{{1000, false}, {1000.5, false}, {2, true}, {5.5, true}} {
		if got := bootedSince(c.up, prev, time.Second); got != c.want {
			t.Errorf("uptime %v, previous answer 5s ago: %v, want %v", c.up, got, c.want)
		}
	}
}
