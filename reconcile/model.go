package reconcile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"sort"

	"github.com/objectstack-fleet/reconciler/internal/canonjson"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// node is the loop's compact record of one desired entry: enough to find
// its row, its dependencies and its dependents without keeping the body.
type node struct {
	ref  registry.Ref
	addr snapshot.Address
	rev  int64
	// deps are the entries this one resolved, in a stable order.
	deps []registry.Ref
	// cleared marks a credential whose value is NULL.
	cleared bool
}

// model is the desired state as the loop knows it, with a reverse index
// from each dependency (present or not) to the entries that name it.
type model struct {
	nodes      map[registry.Ref]*node
	byAddr     map[snapshot.Address]registry.Ref
	dependents map[registry.Ref]map[registry.Ref]struct{}
}

func newModel() *model {
	return &model{
		nodes:      make(map[registry.Ref]*node),
		byAddr:     make(map[snapshot.Address]registry.Ref),
		dependents: make(map[registry.Ref]map[registry.Ref]struct{}),
	}
}

func (m *model) put(n *node) {
	if old, ok := m.nodes[n.ref]; ok {
		m.unindex(old)
		if old.addr != n.addr {
			delete(m.byAddr, old.addr)
		}
	}
	m.nodes[n.ref] = n
	m.byAddr[n.addr] = n.ref
	for _, d := range n.deps {
		set := m.dependents[d]
		if set == nil {
			set = make(map[registry.Ref]struct{}, 1)
			m.dependents[d] = set
		}
		set[n.ref] = struct{}{}
	}
}

func (m *model) remove(ref registry.Ref) {
	n, ok := m.nodes[ref]
	if !ok {
		return
	}
	m.unindex(n)
	delete(m.nodes, ref)
	if m.byAddr[n.addr] == ref {
		delete(m.byAddr, n.addr)
	}
}

func (m *model) unindex(n *node) {
	for _, d := range n.deps {
		if set := m.dependents[d]; set != nil {
			delete(set, n.ref)
			if len(set) == 0 {
				delete(m.dependents, d)
			}
		}
	}
}

// depRev is the revision a dependency contributes to a signature: its
// revision, or -1 when it is not desired.
func (m *model) depRev(r registry.Ref) int64 {
	if n, ok := m.nodes[r]; ok {
		return n.rev
	}
	return -1
}

// engineKey is the engine registry key of a metadata item (DESIGN §5).
func engineKey(org, typ, name string) string { return orgKey(org, typ+"/"+name) }

// orgKey prefixes key with "org:" when the item belongs to an organization,
// so that two organizations' items of one name never collide.
func orgKey(org, key string) string {
	if org != "" {
		return org + ":" + key
	}
	return key
}

// connectorBody is the part of a connector body the loop needs.
type connectorBody struct {
	Enabled *bool `json:"enabled"`
	Auth    struct {
		Type          string `json:"type"`
		CredentialRef string `json:"credentialRef"`
	} `json:"auth"`
}

type datasourceExternal struct {
	CredentialsRef string `json:"credentialsRef"`
	Connector      string `json:"connector"`
}

// engineBody is the union of the reference-bearing shapes (DESIGN §6).
type engineBody struct {
	Object     json.RawMessage `json:"object"`
	Datasource json.RawMessage `json:"datasource"`
	Trigger    *struct {
		Object json.RawMessage `json:"object"`
	} `json:"trigger"`
	Fields []struct {
		Reference json.RawMessage `json:"reference"`
	} `json:"fields"`
}

// jsonString returns raw as a string if it is a non-empty JSON string.
func jsonString(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// metadataNode returns the node of a sys_metadata row, or nil when the row
// is not desired (not active, or a disabled connector). Dependencies are
// extracted best-effort: a malformed body has none and is held by its
// materializer with a reason.
func metadataNode(row *snapshot.MetadataRow) *node {
	if row.State != "active" {
		return nil
	}
	addr := snapshot.Address{Table: snapshot.TableMetadata, Key: row.ID}
	if row.Type == "connector" {
		n := &node{ref: registry.Ref{Kind: registry.KindConnector, Key: orgKey(row.OrganizationID, row.Name)}, addr: addr, rev: row.Revision}
		var b connectorBody
		if json.Unmarshal(row.Metadata, &b) == nil {
			if b.Enabled != nil && !*b.Enabled {
				return nil
			}
			if b.Auth.CredentialRef != "" && b.Auth.Type != "none" {
				n.deps = []registry.Ref{{Kind: registry.KindCredential, Key: b.Auth.CredentialRef}}
			}
		}
		return n
	}
	n := &node{ref: registry.Ref{Kind: registry.KindEngine, Key: engineKey(row.OrganizationID, row.Type, row.Name)}, addr: addr, rev: row.Revision}
	var b engineBody
	if json.Unmarshal(row.Metadata, &b) != nil {
		return n
	}
	var objects []string
	ds := ""
	switch row.Type {
	case "object":
		ds = jsonString(b.Datasource)
		for _, f := range b.Fields {
			if s := jsonString(f.Reference); s != "" {
				objects = append(objects, s)
			}
		}
	case "view", "permission":
		if s := jsonString(b.Object); s != "" {
			objects = append(objects, s)
		}
	case "flow":
		if b.Trigger != nil {
			if s := jsonString(b.Trigger.Object); s != "" {
				objects = append(objects, s)
			}
		}
	}
	seen := make(map[registry.Ref]bool, len(objects)+1)
	for _, o := range objects {
		r := registry.Ref{Kind: registry.KindEngine, Key: engineKey(row.OrganizationID, "object", o)}
		if r == n.ref || seen[r] { // a self-reference is legal and resolves to itself
			continue
		}
		seen[r] = true
		n.deps = append(n.deps, r)
	}
	if ds != "" {
		n.deps = append(n.deps, registry.Ref{Kind: registry.KindDatasource, Key: ds})
	}
	sortRefs(n.deps)
	return n
}

// datasourceNode returns the node of a sys_datasource row, or nil when it
// is inactive. connectorCred resolves a borrowed connector's credential ref.
func datasourceNode(row *snapshot.DatasourceRow, connectorCred func(name string) string) *node {
	if !row.Active {
		return nil
	}
	n := &node{
		ref:  registry.Ref{Kind: registry.KindDatasource, Key: row.Name},
		addr: snapshot.Address{Table: snapshot.TableDatasource, Key: row.Name},
		rev:  row.Revision,
	}
	var ext datasourceExternal
	if json.Unmarshal(row.External, &ext) == nil {
		if ext.CredentialsRef != "" {
			n.deps = append(n.deps, registry.Ref{Kind: registry.KindCredential, Key: ext.CredentialsRef})
		} else if ext.Connector != "" {
			n.deps = append(n.deps, registry.Ref{Kind: registry.KindConnector, Key: ext.Connector})
			if cred := connectorCred(ext.Connector); cred != "" {
				n.deps = append(n.deps, registry.Ref{Kind: registry.KindCredential, Key: cred})
			}
		}
	}
	sortRefs(n.deps)
	return n
}

func credentialNode(row *snapshot.CredentialRow) *node {
	return &node{
		ref:     registry.Ref{Kind: registry.KindCredential, Key: row.Ref},
		addr:    snapshot.Address{Table: snapshot.TableCredential, Key: row.Ref},
		rev:     row.Revision,
		cleared: row.Cleared,
	}
}

func sortRefs(rs []registry.Ref) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Kind != rs[j].Kind {
			return rs[i].Kind < rs[j].Kind
		}
		return rs[i].Key < rs[j].Key
	})
}

// credentialOf returns the credential a node resolved ("" if none).
func (n *node) credentialOf() string {
	for _, d := range n.deps {
		if d.Kind == registry.KindCredential {
			return d.Key
		}
	}
	return ""
}

// signature hashes the entry's own canonical body and the revisions of
// everything it resolved (DESIGN §5). Each field is length-prefixed; a
// column that is not valid JSON hashes as its raw bytes, so that fixing it
// still changes the signature. A row's own revision is not part of it: a
// rewrite of the same body changes nothing.
func signature(n *node, row rowOf, m *model) string {
	h := sigHash{h: sha256.New()}
	h.str(string(n.ref.Kind))
	h.str(n.ref.Key)
	switch {
	case row.meta != nil:
		h.str(row.meta.OrganizationID)
		h.str(row.meta.Type)
		h.str(row.meta.Name)
		h.str(row.meta.Checksum)
		h.int(row.meta.Version) // a republished item is rebuilt even if its body is the same
		h.json(row.meta.Metadata)
	case row.ds != nil:
		h.str(row.ds.Driver)
		h.json(row.ds.Config)
		h.json(row.ds.Pool)
		h.json(row.ds.External)
		h.bool(row.ds.Active)
	case row.cred != nil:
		h.bool(row.cred.Cleared)
		h.int(row.cred.Revision)
	}
	for _, d := range n.deps {
		h.str(d.String())
		h.int(m.depRev(d))
	}
	sum := h.h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// sigHash writes length-prefixed fields into a hash.
type sigHash struct {
	h   hash.Hash
	buf [8]byte
}

func (s *sigHash) int(v int64) {
	binary.BigEndian.PutUint64(s.buf[:], uint64(v))
	s.h.Write(s.buf[:])
}

func (s *sigHash) bytes(b []byte) {
	s.int(int64(len(b)))
	s.h.Write(b)
}

func (s *sigHash) str(v string) { s.bytes([]byte(v)) }

func (s *sigHash) bool(v bool) {
	if v {
		s.int(1)
	} else {
		s.int(0)
	}
}

func (s *sigHash) json(raw []byte) {
	if c, err := canonjson.Canonical(raw); err == nil {
		s.bytes(c)
		return
	}
	s.int(-1) // not JSON: distinct from any canonical form
	s.bytes(raw)
}

func datasourceBody(row *snapshot.DatasourceRow) []byte {
	b, _ := json.Marshal(struct {
		Driver   string          `json:"driver"`
		Config   json.RawMessage `json:"config"`
		Pool     json.RawMessage `json:"pool"`
		External json.RawMessage `json:"external"`
		Active   bool            `json:"active"`
	}{row.Driver, validOrQuoted(row.Config), validOrQuoted(row.Pool), validOrQuoted(row.External), row.Active})
	return b
}

// validOrQuoted returns raw when it is valid JSON, else raw as a JSON
// string, so a malformed column never breaks the enclosing document.
func validOrQuoted(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(raw) {
		return raw
	}
	q, _ := json.Marshal(string(raw))
	return q
}
