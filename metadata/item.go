package metadata

import (
	"slices"
	"strings"

	"github.com/objectstack-fleet/reconciler/registry"
)

// RefKind says what a reference names. Every kind but RefCredential is a
// metadata type: the reference names the item of that type and that name
// (the fleet builds datasources and connectors in registries of their own,
// every other type as an engine item). RefCredential names a credential by
// its ref string.
type RefKind string

// The kinds of reference.
const (
	RefObject     RefKind = "object"
	RefDatasource RefKind = "datasource"
	RefConnector  RefKind = "connector"
	RefDataset    RefKind = "dataset"
	// RefCredential names a credential: "sys_secret:<id>" (a sys_secret
	// row) or the ref of a sys_connector_credential row.
	RefCredential RefKind = "credential"
)

// Reference is one reference from a body to something it needs, by kind
// and name (unresolved; registry.Ref is the address of an entry).
type Reference struct {
	Kind RefKind
	Name string
}

// String returns "object account", the way reasons name a reference.
func (r Reference) String() string { return string(r.Kind) + " " + r.Name }

// SecretID returns the sys_secret id a credential ref names, and whether it
// names one ("sys_secret:<id>" with a non-empty id).
func SecretID(ref string) (string, bool) {
	id, ok := strings.CutPrefix(ref, registry.SecretPrefix)
	return id, ok && id != ""
}

// Item is a parsed metadata body: what it references, whether it is
// desired, and the typed parts its materializer needs.
type Item struct {
	Type string
	Name string
	// Refs are the item's references, each once, sorted by Kind then Name
	// (so two bodies that differ only in member order give equal Refs). A
	// reference to the item itself (an object with a lookup to its own
	// type) is kept: it resolves to the item.
	Refs []Reference
	// Desired is false for a disabled connector (enabled: false) and an
	// inactive datasource (active: false): such an item is not built.
	Desired bool

	// Object holds an object's fields and datasource (type "object").
	Object *Object
	// Connector holds a connector's credential rule (type "connector").
	Connector *Connector
	// Datasource holds a datasource record's references (type "datasource").
	Datasource *Datasource
}

// Credential returns the credential ref the item names directly ("" if
// none). A datasource that borrows its connector's credential names the
// connector instead; resolving that is the caller's job.
func (it *Item) Credential() string {
	for _, r := range it.Refs {
		if r.Kind == RefCredential {
			return r.Name
		}
	}
	return ""
}

// Object is the typed part of an object body.
type Object struct {
	// Fields in the order the body lists them.
	Fields []Field
	// Datasource is the datasource the object lives in; "" for the node's
	// primary database ("default" or unset).
	Datasource string
}

// Field is one field of an object.
type Field struct {
	Name string
	Type string
	// Reference is the object a lookup, master_detail or tree field links
	// to ("" if none).
	Reference string
}

// Connector is the typed part of a connector body: which credential it
// uses.
type Connector struct {
	Enabled bool
	// AuthType is "bearer", "api-key", "basic" or "none" (also when the
	// body has no auth).
	AuthType string
	// CredentialRef is the credential the auth type needs ("" for none).
	CredentialRef string
}

// Datasource is the typed part of a datasource record.
type Datasource struct {
	Active bool
	Driver string
	// CredentialsRef is external.credentialsRef ("" if unset).
	CredentialsRef string
	// Connector is external.connector, the connector whose credential the
	// datasource borrows when it has no credentialsRef ("" if unset).
	Connector string
}

// refSet collects references once each, in constant time per reference
// (a scan while there are few, a map beyond). The first few are kept in
// place: most bodies name no more, and collecting them allocates nothing.
type refSet struct {
	few  [smallSet]Reference
	n    int // of few in use; beyond them, list holds them all
	seen map[Reference]struct{}
	list []Reference
}

func (s *refSet) add(kind RefKind, name string) {
	r := Reference{Kind: kind, Name: name}
	if s.seen == nil {
		if slices.Contains(s.few[:s.n], r) {
			return
		}
		if s.n < len(s.few) {
			s.few[s.n] = r // few: a scan beats a map
			s.n++
			return
		}
		s.seen = make(map[Reference]struct{}, 2*smallSet)
		s.list = make([]Reference, 0, 2*smallSet)
		for _, x := range s.few {
			s.seen[x] = struct{}{}
			s.list = append(s.list, x)
		}
	}
	if _, ok := s.seen[r]; ok {
		return
	}
	s.seen[r] = struct{}{}
	s.list = append(s.list, r)
}

// all returns the references collected, in the order added.
func (s *refSet) all() []Reference {
	if s.list != nil {
		return s.list
	}
	return s.few[:s.n]
}

// item returns a copy of it whose Refs are the references collected,
// sorted. An item with a few references shares one allocation with them
// (Refs is called for every row), filled as it is allocated (a fresh
// object needs no write barriers).
func (s *refSet) item(it Item) *Item {
	refs := s.all()
	if len(refs) > 1 {
		slices.SortFunc(refs, func(a, b Reference) int {
			if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	switch len(refs) {
	case 1:
		x := &struct {
			it   Item
			refs [1]Reference
		}{it, [1]Reference{refs[0]}}
		x.it.Refs = x.refs[:]
		return &x.it
	case 2:
		x := &struct {
			it   Item
			refs [2]Reference
		}{it, [2]Reference{refs[0], refs[1]}}
		x.it.Refs = x.refs[:]
		return &x.it
	}
	out := new(Item)
	*out = it
	switch {
	case len(refs) == 0:
	case s.list != nil:
		out.Refs = s.list // already on the heap
	default:
		out.Refs = slices.Clone(refs)
	}
	return out
}
