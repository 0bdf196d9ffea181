package metadata

import (
	"slices"
	"strings"
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

// Ref is one reference from a body to something it needs.
type Ref struct {
	Kind RefKind
	Name string
}

// IsMetadata reports whether r names a metadata item (type string(r.Kind),
// name r.Name) rather than a credential.
func (r Ref) IsMetadata() bool { return r.Kind != RefCredential }

// String returns "object account", the way reasons name a reference.
func (r Ref) String() string { return string(r.Kind) + " " + r.Name }

// SecretPrefix starts a credential ref that names a sys_secret row.
const SecretPrefix = "sys_secret:"

// SecretID returns the sys_secret id a credential ref names, and whether it
// names one ("sys_secret:<id>" with a non-empty id).
func SecretID(ref string) (string, bool) {
	id, ok := strings.CutPrefix(ref, SecretPrefix)
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
	Refs []Ref
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
// (a scan while there are few, a map beyond).
type refSet struct {
	seen map[Ref]struct{}
	list []Ref
}

func (s *refSet) add(kind RefKind, name string) {
	r := Ref{Kind: kind, Name: name}
	if s.seen == nil {
		if slices.Contains(s.list, r) {
			return
		}
		if len(s.list) < smallSet {
			s.list = append(s.list, r) // few: a scan beats a map
			return
		}
		s.seen = make(map[Ref]struct{}, 2*smallSet)
		for _, x := range s.list {
			s.seen[x] = struct{}{}
		}
	}
	if _, ok := s.seen[r]; ok {
		return
	}
	s.seen[r] = struct{}{}
	s.list = append(s.list, r)
}

func (s *refSet) sorted() []Ref {
	slices.SortFunc(s.list, func(a, b Ref) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return s.list
}
