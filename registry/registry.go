package registry

import (
	"sort"
	"sync"
)

// Registry is the set of entries of one kind. Safe for concurrent use; it
// never calls out while holding its lock.
type Registry struct {
	kind    Kind
	mu      sync.RWMutex
	entries map[string]*Entry
	// sorted are the keys in order, built by the first Page (nil: to be
	// built), so that a page costs what it shows, not a sort of every
	// key. Keys that came since are in added, and removed counts those
	// that went: the next Page merges them in (one pass over sorted)
	// unless so many came that sorting again is as cheap.
	sorted  []string
	added   []string
	removed int
}

// keyAdded and keyRemoved keep the order of Page up to date (r.mu held).
func (r *Registry) keyAdded(key string) {
	if r.sorted == nil {
		return
	}
	r.added = append(r.added, key)
	if len(r.added) > len(r.sorted)/8+64 {
		r.sorted, r.added, r.removed = nil, nil, 0 // sorting again costs less
	}
}

func (r *Registry) keyRemoved() {
	if r.sorted != nil {
		r.removed++
	}
}

// order brings sorted up to date (r.mu held for writing).
func (r *Registry) order() {
	if r.sorted == nil {
		keys := make([]string, 0, len(r.entries))
		for k := range r.entries {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		r.sorted, r.added, r.removed = keys, nil, 0
		return
	}
	if len(r.added) == 0 && r.removed == 0 {
		return
	}
	sort.Strings(r.added)
	merged := make([]string, 0, len(r.entries))
	a, b := r.sorted, r.added
	for len(a) > 0 || len(b) > 0 {
		var k string
		if len(b) == 0 || (len(a) > 0 && a[0] <= b[0]) {
			k, a = a[0], a[1:]
		} else {
			k, b = b[0], b[1:]
		}
		if n := len(merged); n > 0 && merged[n-1] == k {
			continue // deleted and created again
		}
		if r.removed > 0 {
			if _, ok := r.entries[k]; !ok {
				continue
			}
		}
		merged = append(merged, k)
	}
	r.sorted, r.added, r.removed = merged, nil, 0
}

// New returns an empty registry of kind k.
func New(k Kind) *Registry {
	return &Registry{kind: k, entries: make(map[string]*Entry)}
}

// Get returns a copy of the entry for key.
func (r *Registry) Get(key string) (Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[key]
	if !ok {
		return Entry{}, false
	}
	out := *e
	out.History = e.History.clip()
	return out, true
}

// Put stores a copy of e under e.Key. The key's parts are filled in from
// the key (an entry already stored under it has them).
func (r *Registry) Put(e Entry) {
	e.Kind = r.kind
	if p, err := ParseKey(r.kind, e.Key); err == nil {
		e.KeyParts = p // what an entry stored under the key has too
	}
	stored := new(Entry) // e itself stays on the stack
	*stored = e
	r.mu.Lock()
	// One probe: an entry already stored is replaced (the registry hands
	// out copies, never its pointers).
	n := len(r.entries)
	r.entries[e.Key] = stored
	if len(r.entries) != n {
		r.keyAdded(e.Key)
	}
	r.mu.Unlock()
}

// Upsert calls fn with the entry for key under the lock (fn must not
// block), first storing an empty one with the key's parts if there is
// none (existed false). fn may change every field but Kind, Key and
// KeyParts: one lookup where Get and Put take two.
func (r *Registry) Upsert(key string, fn func(e *Entry, existed bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if !ok {
		e = &Entry{Kind: r.kind, Key: key}
		if p, err := ParseKey(r.kind, key); err == nil {
			e.KeyParts = p
		}
		r.entries[key] = e
		r.keyAdded(key)
	}
	parts := e.KeyParts
	fn(e, ok)
	e.Kind, e.Key, e.KeyParts = r.kind, key, parts
}

// Reserve makes room for n entries in a registry that is empty (as at a
// first full sync), so that filling it does not grow its map step by step.
func (r *Registry) Reserve(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) == 0 && n > 0 {
		r.entries = make(map[string]*Entry, n)
	}
}

// Update applies fn to the entry for key under the lock (fn must not block)
// and reports whether it existed.
func (r *Registry) Update(key string, fn func(*Entry)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if ok {
		fn(e)
	}
	return ok
}

// Delete removes key and returns the removed entry.
func (r *Registry) Delete(key string) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if !ok {
		return Entry{}, false
	}
	delete(r.entries, key)
	r.keyRemoved()
	return *e, true
}

// Len returns the number of entries.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.entries)
}

// Keys returns every key, sorted.
func (r *Registry) Keys() []string {
	r.mu.RLock()
	keys := make([]string, 0, len(r.entries))
	for k := range r.entries {
		keys = append(keys, k)
	}
	r.mu.RUnlock()
	sort.Strings(keys)
	return keys
}

// List returns copies of the entries matching filter (nil: all), sorted by key.
func (r *Registry) List(filter func(*Entry) bool) []Entry {
	r.mu.RLock()
	out := make([]Entry, 0, len(r.entries))
	for _, e := range r.entries {
		if filter == nil || filter(e) {
			out = append(out, *e)
			out[len(out)-1].History = e.History.clip()
		}
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Page appends to out copies of the entries matching filter (nil: all)
// whose keys sort after after ("": from the first), in key order, until
// out holds limit entries (limit <= 0: no limit), and returns it. The
// first page sorts the keys once; a page after keys came or went merges
// them in; pages cost what they skip and show.
func (r *Registry) Page(out []Entry, after string, limit int, filter func(*Entry) bool) []Entry {
	r.mu.RLock()
	if r.sorted == nil || len(r.added) > 0 || r.removed > 0 {
		r.mu.RUnlock()
		r.mu.Lock() // the order to bring up to date first
		defer r.mu.Unlock()
		r.order()
	} else {
		defer r.mu.RUnlock()
	}
	i := 0
	if after != "" {
		i = sort.SearchStrings(r.sorted, after)
		if i < len(r.sorted) && r.sorted[i] == after {
			i++
		}
	}
	for ; i < len(r.sorted) && (limit <= 0 || len(out) < limit); i++ {
		e := r.entries[r.sorted[i]]
		if filter == nil || filter(e) {
			c := *e
			c.History = e.History.clip()
			out = append(out, c)
		}
	}
	return out
}

// Set is the four registries of a replica.
type Set struct {
	byKind map[Kind]*Registry
}

// NewSet returns empty registries of every kind.
func NewSet() *Set {
	s := &Set{byKind: make(map[Kind]*Registry, len(Kinds))}
	for _, k := range Kinds {
		s.byKind[k] = New(k)
	}
	return s
}

// Of returns the registry of kind k (nil for an unknown kind).
func (s *Set) Of(k Kind) *Registry { return s.byKind[k] }

// List returns the entries of kind k ("" for every kind) in state st
// ("" for every state), ordered by kind (apply order) then key.
func (s *Set) List(k Kind, st State) []Entry {
	var out []Entry
	for _, kind := range Kinds {
		if k != "" && kind != k {
			continue
		}
		out = append(out, s.byKind[kind].List(func(e *Entry) bool { return st == "" || e.State == st })...)
	}
	return out
}

// Query selects entries for Set.Page. Zero fields select everything.
type Query struct {
	Kind  Kind  // one kind
	State State // one state
	// Org, Type and Package select by the key's parts; "-" selects the
	// entries without that part.
	Org, Type, Package string
	// After resumes after the entry of kind AfterKind under key After
	// (apply order, then key); Limit caps the page (<= 0: no cap).
	AfterKind Kind
	After     string
	Limit     int
}

func (q *Query) match(e *Entry) bool {
	return (q.State == "" || e.State == q.State) && part(q.Org, e.Org) && part(q.Type, e.Type) &&
		part(q.Package, e.Package)
}

func part(want, got string) bool {
	switch want {
	case "":
		return true
	case "-":
		return got == ""
	}
	return want == got
}

// Page returns the entries q selects, ordered by kind (apply order) then
// key, resuming after q's cursor and at most q.Limit of them.
func (s *Set) Page(q Query) []Entry {
	var out []Entry
	started := q.AfterKind == ""
	for _, kind := range Kinds {
		if !started {
			if kind != q.AfterKind {
				continue
			}
			started = true
		}
		if q.Kind != "" && kind != q.Kind {
			continue
		}
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
		after := ""
		if kind == q.AfterKind {
			after = q.After
		}
		out = s.byKind[kind].Page(out, after, q.Limit, q.match)
	}
	if out == nil {
		out = []Entry{}
	}
	return out
}

// View is a read-only view of a Set: readers see the live entries (as
// copies) and cannot change them.
type View struct{ s *Set }

// View returns a read-only view of s.
func (s *Set) View() View { return View{s} }

// Get returns a copy of the entry of kind k under key.
func (v View) Get(k Kind, key string) (Entry, bool) {
	r := v.s.Of(k)
	if r == nil {
		return Entry{}, false
	}
	return r.Get(key)
}

// Len returns the number of entries of kind k.
func (v View) Len(k Kind) int {
	r := v.s.Of(k)
	if r == nil {
		return 0
	}
	return r.Len()
}

// List is Set.List.
func (v View) List(k Kind, st State) []Entry { return v.s.List(k, st) }

// Page is Set.Page.
func (v View) Page(q Query) []Entry { return v.s.Page(q) }
