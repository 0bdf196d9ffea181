package registry

import (
	"sync"
	"testing"
)

func TestSetListAndCounts(t *testing.T) {
	t.Parallel()
	s := NewSet()
	s.Of(KindEngine).Put(Entry{Key: "view/b", State: StateHeld, Reason: "references missing object a"})
	s.Of(KindEngine).Put(Entry{Key: "object/a", State: StateReady})
	s.Of(KindCredential).Put(Entry{Key: "tok", State: StateReady})
	got := s.List("", "")
	want := []string{"credential/tok", "engine/object/a", "engine/view/b"} // apply order, then key
	if len(got) != len(want) {
		t.Fatalf("List: %v", got)
	}
	for i, e := range got {
		if (Ref{e.Kind, e.Key}).String() != want[i] {
			t.Fatalf("List[%d] = %s/%s, want %s", i, e.Kind, e.Key, want[i])
		}
	}
	if held := s.List(KindEngine, StateHeld); len(held) != 1 || held[0].Key != "view/b" {
		t.Fatalf("held engine entries: %v", held)
	}
	// Readers get copies: changing one does not change the registry.
	e, _ := s.Of(KindEngine).Get("object/a")
	e.State = StateDegraded
	if e2, _ := s.Of(KindEngine).Get("object/a"); e2.State != StateReady {
		t.Fatal("Get returned a shared entry")
	}
	// The read-only view sees the same entries, as copies.
	v := s.View()
	if e, ok := v.Get(KindEngine, "object/a"); !ok || e.State != StateReady || v.Len(KindEngine) != 2 || len(v.List("", "")) != 3 {
		t.Fatalf("view: %v %v, %d engine entries", e, ok, v.Len(KindEngine))
	}
	if _, ok := v.Get("bogus", "x"); ok || v.Len("bogus") != 0 {
		t.Fatal("view of an unknown kind")
	}
	if _, ok := s.Of(KindEngine).Delete("object/a"); !ok || s.Of(KindEngine).Len() != 1 {
		t.Fatal("Delete")
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in string
		ok bool
	}{{"engine", true}, {"credential", true}, {"Engine", false}, {"", false}} {
		if _, err := ParseKind(c.in); (err == nil) != c.ok {
			t.Errorf("ParseKind(%q): %v", c.in, err)
		}
	}
	if _, err := ParseState("held"); err != nil {
		t.Error(err)
	}
	if _, err := ParseState("stuck"); err == nil {
		t.Error("ParseState accepted an unknown state")
	}
}

// TestConcurrentReaders: readers copy while a writer updates (run with -race).
func TestConcurrentReaders(t *testing.T) {
	t.Parallel()
	r := New(KindConnector)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			r.Put(Entry{Key: "k", Revision: int64(i), State: StateReady})
			r.Update("k", func(e *Entry) { e.Reason = "x" })
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			_ = r.List(nil)
			_, _ = r.Get("k")
		}
	}()
	wg.Wait()
	if e, _ := r.Get("k"); e.Kind != KindConnector || e.Revision != 999 {
		t.Fatalf("last write lost: %+v", e)
	}
}

// Upsert stores a new entry with its key's parts, changes an existing one
// in place, and keeps the kind, key and parts whatever fn writes.
func TestUpsert(t *testing.T) {
	t.Parallel()
	r := New(KindEngine)
	r.Upsert("org1:object/a@p", func(e *Entry, existed bool) {
		if existed {
			t.Fatal("a new key existed")
		}
		e.State, e.Revision = StatePending, 1
	})
	r.Upsert("org1:object/a@p", func(e *Entry, existed bool) {
		if !existed || e.State != StatePending {
			t.Fatalf("existed %v, state %q", existed, e.State)
		}
		*e = Entry{Key: "other", State: StateReady, Revision: 2}
	})
	e, ok := r.Get("org1:object/a@p")
	want := KeyParts{Org: "org1", Type: "object", Name: "a", Package: "p"}
	if !ok || e.Kind != KindEngine || e.Key != "org1:object/a@p" || e.KeyParts != want || e.State != StateReady || e.Revision != 2 || r.Len() != 1 {
		t.Fatalf("got %+v (ok %v, len %d)", e, ok, r.Len())
	}
}
