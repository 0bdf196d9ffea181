package registry

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
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

// Pages walk the entries in kind then key order, resuming after a cursor,
// with filters on the key's parts; a key that comes or goes between pages
// is seen (or not) as its place says.
func TestSetPage(t *testing.T) {
	s := NewSet()
	for _, k := range []string{"object/b", "object/a", "view/c", "o1:object/d", "object/e@crm"} {
		s.Of(KindEngine).Put(Entry{Key: k, State: StateReady})
	}
	s.Of(KindConnector).Put(Entry{Key: "crm", State: StateHeld})
	keys := func(es []Entry) string {
		var b []string
		for _, e := range es {
			b = append(b, string(e.Kind)+"/"+e.Key)
		}
		return strings.Join(b, " ")
	}
	for _, tc := range []struct {
		q    Query
		want string
	}{
		{Query{}, "connector/crm engine/o1:object/d engine/object/a engine/object/b engine/object/e@crm engine/view/c"},
		{Query{Limit: 2}, "connector/crm engine/o1:object/d"},
		{Query{Limit: 2, AfterKind: KindEngine, After: "o1:object/d"}, "engine/object/a engine/object/b"},
		{Query{AfterKind: KindConnector, After: "crm", Limit: 1}, "engine/o1:object/d"},
		{Query{Type: "object", Org: "-"}, "engine/object/a engine/object/b engine/object/e@crm"},
		{Query{Package: "crm"}, "engine/object/e@crm"},
		{Query{Org: "o1"}, "engine/o1:object/d"},
		{Query{State: StateHeld}, "connector/crm"},
		{Query{Kind: KindEngine, Limit: 1, AfterKind: KindEngine, After: "object/b"}, "engine/object/e@crm"},
	} {
		if got := keys(s.Page(tc.q)); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.q, got, tc.want)
		}
	}
	first := s.Page(Query{Kind: KindEngine, Limit: 2})
	s.Of(KindEngine).Put(Entry{Key: "object/aa"})
	s.Of(KindEngine).Delete("object/b")
	rest := s.Page(Query{Kind: KindEngine, AfterKind: KindEngine, After: first[len(first)-1].Key})
	if got := keys(rest); got != "engine/object/aa engine/object/e@crm engine/view/c" {
		t.Errorf("after a change: %s", got)
	}
	// Deleted and created again, created and deleted, between two pages.
	s.Of(KindEngine).Delete("object/a")
	s.Of(KindEngine).Put(Entry{Key: "object/a"})
	s.Of(KindEngine).Put(Entry{Key: "object/zz"})
	s.Of(KindEngine).Delete("object/zz")
	if got := keys(s.Page(Query{Kind: KindEngine})); got != "engine/o1:object/d engine/object/a engine/object/aa engine/object/e@crm engine/view/c" {
		t.Errorf("after churn: %s", got)
	}
	// Many created at once: sorted again.
	for i := range 200 {
		s.Of(KindEngine).Put(Entry{Key: fmt.Sprintf("view/n%03d", i)})
	}
	if got := s.Page(Query{Kind: KindEngine, AfterKind: KindEngine, After: "view/c", Limit: 2}); keys(got) != "engine/view/n000 engine/view/n001" {
		t.Errorf("after 200 creates: %s", keys(got))
	}
}

// A copy's history is its own: adding to it never shows in the stored
// entry, nor the stored entry's additions in an earlier copy.
func TestHistoryCopies(t *testing.T) {
	r := New(KindEngine)
	at := time.Unix(1700000000, 0)
	r.Upsert("object/a", func(e *Entry, _ bool) { e.History.Add(at, StatePending, "not tried yet", 1) })
	cp, _ := r.Get("object/a")
	cp.History.Add(at, StateHeld, "copy", 1)
	r.Upsert("object/a", func(e *Entry, _ bool) { e.History.Add(at.Add(time.Second), StateReady, "", 1) })
	got, _ := r.Get("object/a")
	if h := got.History.List(); len(h) != 2 || h[1].State != StateReady || !h[1].At.Equal(at.Add(time.Second)) {
		t.Errorf("stored history: %+v", h)
	}
	if h := cp.History.List(); len(h) != 2 || h[1].Reason != "copy" {
		t.Errorf("copy's history: %+v", h)
	}
	r.Upsert("object/a", func(e *Entry, _ bool) { e.History.Add(at, StateReady, "", 1) }) // the same again: no transition
	for i := range 2 * HistoryLen {
		r.Upsert("object/a", func(e *Entry, _ bool) { e.History.Add(at, StateDegraded, fmt.Sprint(i), 2) })
	}
	got, _ = r.Get("object/a")
	if h := got.History.List(); len(h) != HistoryLen || h[len(h)-1].Reason != fmt.Sprint(2*HistoryLen-1) {
		t.Errorf("bounded history: %d kept, last %+v", len(h), h[len(h)-1])
	}
}
