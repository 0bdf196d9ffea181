package reconcile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/objectstack-fleet/reconciler/internal/hashspec"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// want is one reference of an entry, by name: resolved against the model
// each time the entry is planned (organization fallback, package preference,
// code objects: see resolve), so a target that appears, moves or goes away
// re-resolves its referrers.
type want struct {
	kind registry.Kind
	typ  string // engine: the metadata type referenced ("object", …)
	name string // the name referenced; credentials: the credential key
	sym  string // symOf(kind, typ, name), built once: the symbol it resolves through
}

func newWant(kind registry.Kind, typ, name string) want {
	return want{kind: kind, typ: typ, name: name, sym: symOf(kind, typ, name)}
}

// symOf is the symbol of a reference: every row answering to it is a
// candidate.
func symOf(kind registry.Kind, typ, name string) string {
	return string(kind) + "\x00" + typ + "\x00" + name
}

// node is the loop's compact record of one desired entry: enough to find
// its row, resolve its references and find its dependents without keeping
// the body.
type node struct {
	ref  registry.Ref
	addr snapshot.Address
	rev  int64
	// org and pkg scope the row (resolution prefers the referrer's org, then
	// no org; within one, no package, then the lowest package).
	org, pkg string
	// sym is the symbol this node answers to.
	sym string
	// wants are the references to resolve, in a stable order.
	wants []want
	// Credentials only: the value, or why it cannot be used.
	secret secret.Secret
	hold   string
	// scope is a sys_secret's organization, namespace and key (trust.go).
	scope *secretScope
	// fault is why the body cannot be used at all (it is held with it).
	fault string
	// deferred: the store withheld the body for the read's total
	// (engine.max_total_bytes): the row is read again at the next poll,
	// and its entry is left as it is meanwhile (memory.go).
	deferred bool
	// digest is the digest of the body this node was parsed from (bodySum),
	// for signatures of the same revision.
	digest bodyDigest
	// at is the index of the node's row in its table's rows, in the relist
	// that built it (buildModel), so that applying that relist finds each
	// row without an index by address.
	at int
}

// model is the desired state as the loop knows it, with an index of
// candidates per symbol and of referrers per symbol.
type model struct {
	nodes      map[registry.Ref]*node
	byAddr     map[snapshot.Address]registry.Ref
	bySym      map[string][]*node
	dependents map[string]map[registry.Ref]struct{}
	code       []string // object names defined in code, besides sys_*
	// shared lists the rows of keys several rows claim (organization or
	// package NULL beside '', which key alike), by key.
	shared map[registry.Ref][]snapshot.Address
	// owners binds connector credential keys to the organization they
	// serve (trust.go); replaced, never changed in place.
	owners map[string]string
}

// newModel returns an empty model with room for about size nodes.
func newModel(codeObjects []string, size int) *model {
	m := &model{
		nodes:      make(map[registry.Ref]*node, size),
		byAddr:     make(map[snapshot.Address]registry.Ref, size),
		bySym:      make(map[string][]*node, size),
		dependents: make(map[string]map[registry.Ref]struct{}),
		code:       codeObjects,
	}
	return m
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
	m.bySym[n.sym] = append(m.bySym[n.sym], n)
	for _, w := range n.wants {
		s := w.sym
		set := m.dependents[s]
		if set == nil {
			set = make(map[registry.Ref]struct{}, 1)
			m.dependents[s] = set
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
	if c := m.bySym[n.sym]; len(c) > 0 {
		for i, cn := range c {
			if cn.ref == n.ref {
				c[i] = c[len(c)-1]
				c = c[:len(c)-1]
				break
			}
		}
		if len(c) == 0 {
			delete(m.bySym, n.sym)
		} else {
			m.bySym[n.sym] = c
		}
	}
	for _, w := range n.wants {
		s := w.sym
		if set := m.dependents[s]; set != nil {
			delete(set, n.ref)
			if len(set) == 0 {
				delete(m.dependents, s)
			}
		}
	}
}

// markDependents marks dirty every entry referring to one of syms, and,
// through a connector it marks, the datasources borrowing that connector's
// credential.
func (m *model) markDependents(syms map[string]bool, dirty map[registry.Ref]bool) {
	for s := range syms {
		for dep := range m.dependents[s] {
			dirty[dep] = true
			if n := m.nodes[dep]; n != nil && dep.Kind == registry.KindConnector {
				for b := range m.dependents[n.sym] {
					dirty[b] = true
				}
			}
		}
	}
}

// codeKey is what a reference to an object defined in code resolves to in
// signatures.
const codeKey = "(code)"

// resolveNode returns the node a reference w of n resolves to: the
// candidate in n's organization, else the org-less one; among several, the
// one without a package, then the lowest package. An object defined in
// code resolves to nil (ok true). ok is false when nothing answers.
func (m *model) resolveNode(n *node, w want) (*node, bool) {
	cands := m.bySym[w.sym]
	if len(cands) == 0 {
		if w.kind == registry.KindEngine && w.typ == "object" && metadata.IsCodeObject(w.name, m.code) {
			return nil, true
		}
		return nil, false
	}
	if w.kind == registry.KindCredential {
		return cands[0], true
	}
	var best *node
	bestRank := 3
	for _, c := range cands {
		rank := 2
		switch c.org {
		case n.org:
			rank = 0
		case "":
			rank = 1
		}
		if rank == 2 {
			continue
		}
		if best == nil || rank < bestRank || (rank == bestRank && pkgLess(c.pkg, best.pkg)) {
			best, bestRank = c, rank
		}
	}
	return best, best != nil
}

// shareKey records that the rows a and b claim one key.
func (m *model) shareKey(ref registry.Ref, a, b snapshot.Address) {
	if m.shared == nil {
		m.shared = make(map[registry.Ref][]snapshot.Address)
	}
	for _, x := range []snapshot.Address{a, b} {
		if !slices.Contains(m.shared[ref], x) {
			m.shared[ref] = append(m.shared[ref], x)
		}
	}
}

// touchesShared reports whether addrs change a row of a key other rows
// claim too.
func (m *model) touchesShared(addrs []snapshot.Address) bool {
	if len(m.shared) == 0 {
		return false
	}
	for _, a := range addrs {
		for _, rows := range m.shared {
			if slices.Contains(rows, a) {
				return true
			}
		}
	}
	return false
}

// pkgLess orders packages for resolution: no package first, then by id.
func pkgLess(a, b string) bool {
	if a == "" || b == "" {
		return a == "" && b != ""
	}
	return a < b
}

// reference is the metadata reference a want stands for, as reasons name it.
func (w want) reference() metadata.Reference {
	switch w.kind {
	case registry.KindEngine:
		return metadata.Reference{Kind: metadata.RefKind(w.typ), Name: w.name}
	case registry.KindCredential:
		return metadata.Reference{Kind: metadata.RefCredential, Name: credentialName(w.name)}
	}
	return metadata.Reference{Kind: metadata.RefKind(w.kind), Name: w.name}
}

// credentialWant is the want of a credential named in a body: a
// "sys_secret:<id>" names a sys_secret row, anything else a
// sys_connector_credential ref.
func credentialWant(ref string) want {
	if id, ok := metadata.SecretID(ref); ok {
		return newWant(registry.KindCredential, "", registry.SecretKey(id))
	}
	return newWant(registry.KindCredential, "", registry.CredentialKey(ref))
}

// MetadataRef is the entry a sys_metadata row is desired as (when active):
// a connector, a datasource or an engine item, by its key.
func MetadataRef(row *snapshot.MetadataRow) registry.Ref {
	switch row.Type {
	case "connector":
		return registry.Ref{Kind: registry.KindConnector, Key: registry.NamedKey(row.OrganizationID, row.Name, row.PackageID)}
	case "datasource":
		return registry.Ref{Kind: registry.KindDatasource, Key: registry.NamedKey(row.OrganizationID, row.Name, row.PackageID)}
	}
	return registry.Ref{Kind: registry.KindEngine, Key: registry.EngineKey(row.OrganizationID, row.Type, row.Name, row.PackageID)}
}

// metadataNode returns the node of a sys_metadata row, or nil when the row
// is not desired (not active, a disabled connector, an inactive
// datasource). A body that cannot be parsed still gets a node, carrying
// the fault, so that its entry is held with the reason.
func metadataNode(row *snapshot.MetadataRow, lim metadata.Limits) *node {
	if row.State != "active" {
		return nil
	}
	n := &node{addr: snapshot.Address{Table: snapshot.TableMetadata, Key: row.ID}, rev: row.Revision,
		org: row.OrganizationID, pkg: row.PackageID, ref: MetadataRef(row)}
	switch n.ref.Kind {
	case registry.KindConnector, registry.KindDatasource:
		n.sym = symOf(n.ref.Kind, "", row.Name)
	default:
		n.sym = symOf(registry.KindEngine, row.Type, row.Name)
	}
	// One pass canonicalizes the body for signatures and proves it JSON,
	// so that parsing need not validate it again.
	if row.Withheld < 0 {
		n.deferred = true
		return n
	}
	var canonical bool
	n.digest, canonical = bodySum(row.Metadata)
	if row.Withheld > 0 { // above the store's cap: not even read
		n.fault = fmt.Sprintf("body is %d bytes, above the store's read cap (snapshot.OpenOptions.MaxBodyBytes)", row.Withheld)
		if err := lim.CheckBody(row.Withheld); err != nil {
			n.fault = err.Error()
		}
		return n
	}
	parse := metadata.Parse // the fault of a body that is not JSON says where
	if canonical {
		parse = metadata.Refs
	}
	it, err := parse(row.Type, row.Name, row.Metadata, lim)
	if err != nil {
		n.fault = err.Error()
		return n
	}
	if !it.Desired {
		return nil
	}
	n.wants = make([]want, 0, len(it.Refs))
	for _, r := range it.Refs {
		var w want
		switch r.Kind {
		case metadata.RefCredential:
			w = credentialWant(r.Name)
		case metadata.RefConnector:
			w = newWant(registry.KindConnector, "", r.Name)
		case metadata.RefDatasource:
			w = newWant(registry.KindDatasource, "", r.Name)
		default:
			w = newWant(registry.KindEngine, string(r.Kind), r.Name)
		}
		if w.sym == n.sym {
			continue // a self-reference is legal and resolves to itself
		}
		n.wants = append(n.wants, w)
	}
	return n
}

// credentialNode returns the node of a sys_connector_credential row.
func credentialNode(row *snapshot.CredentialRow) *node {
	key := registry.CredentialKey(row.Ref)
	n := &node{
		ref:    registry.Ref{Kind: registry.KindCredential, Key: key},
		addr:   snapshot.Address{Table: snapshot.TableCredential, Key: row.Ref},
		rev:    row.Revision,
		sym:    symOf(registry.KindCredential, "", key),
		secret: row.Value,
	}
	if row.Cleared {
		n.hold = "credential " + row.Ref + " is cleared"
	}
	return n
}

// secretNode returns the node of a sys_secret row, decrypted with open.
func secretNode(row *snapshot.SecretRow, open SecretOpener) *node {
	key := registry.SecretKey(row.ID)
	n := &node{
		ref:   registry.Ref{Kind: registry.KindCredential, Key: key},
		addr:  snapshot.Address{Table: snapshot.TableSecret, Key: row.ID},
		rev:   row.Revision,
		sym:   symOf(registry.KindCredential, "", key),
		scope: scopeOf(row),
	}
	if row.Withheld > 0 {
		n.hold = fmt.Sprintf("secret %s cannot be decrypted: its ciphertext is %d bytes, above the %d KiB cap", row.ID, row.Withheld, snapshot.MaxCiphertextBytes>>10)
		return n
	}
	if open == nil {
		n.hold = "secret " + row.ID + " cannot be decrypted: no secret key configured"
		return n
	}
	v, err := open.Open(*row)
	if err != nil {
		n.hold = "secret " + row.ID + " cannot be decrypted: " + err.Error()
		return n
	}
	n.secret = v
	return n
}

// SecretOpener decrypts sys_secret rows. Errors name the secret and the
// cause, never any secret bytes.
type SecretOpener interface {
	Open(row snapshot.SecretRow) (secret.Secret, error)
}

// signature hashes the entry's own canonical body and the revisions of
// everything it resolved. Each field is length-prefixed; a
// column that is not valid JSON hashes as its raw bytes, so that fixing it
// still changes the signature. A row's own revision is not part of it: a
// rewrite of the same body changes nothing.
func signature(n *node, row rowOf, m *model) string {
	h := getSig()
	defer putSig(h)
	h.b = h.b[:0]
	h.str(string(n.ref.Kind))
	h.str(n.ref.Key)
	switch {
	case row.meta != nil:
		h.str(row.meta.OrganizationID)
		h.str(row.meta.PackageID)
		h.str(row.meta.Type)
		h.str(row.meta.Name)
		h.str(row.meta.Checksum)
		h.int(int64(math.Float64bits(row.meta.Version))) // a republished item is rebuilt even if its body is the same
		digest := n.digest
		if row.meta.Revision != n.rev || row.meta.Revision == 0 {
			digest, _ = bodySum(row.meta.Metadata) // a newer row than the node's (re-read for a dependent)
		}
		h.bytes(digest[:])
	case row.cred != nil, row.secret != nil:
		h.str(n.hold)
		h.int(n.rev)
	}
	for _, w := range n.wants {
		h.str(w.sym)
		dn, ok := m.resolveNode(n, w)
		switch {
		case !ok:
			h.int(-1)
			continue
		case dn == nil: // defined in code
			h.str(codeKey)
			h.int(-1)
			continue
		}
		h.str(dn.ref.Key)
		h.int(dn.rev)
		if w.kind == registry.KindCredential {
			h.str(m.ownerOf(w.name)) // who may use it (trust.go)
		}
		// A borrowed connector's credential is part of the borrower.
		if dn.ref.Kind == registry.KindConnector {
			for _, cw := range dn.wants {
				if cw.kind == registry.KindCredential {
					cr, ok := m.resolveNode(dn, cw)
					if ok {
						h.str(cr.ref.Key)
						h.int(cr.rev)
						h.str(m.ownerOf(cw.name))
					} else {
						h.str("")
						h.int(-1)
					}
				}
			}
		}
	}
	sum := sha256.Sum256(h.b)
	var out [32]byte
	hex.Encode(out[:], sum[:16])
	return string(out[:])
}

// sigHash collects the length-prefixed fields of a signature (hashed in
// one go: no allocation per field).
type sigHash struct{ b []byte }

// sigBufs recycles the buffers of signature, called on every core.
var sigBufs = sync.Pool{New: func() any { return new(sigHash) }}

// maxPooledSig bounds the buffer a recycled sigHash keeps (a large body's
// canonical text is not held for the next call).
const maxPooledSig = 1 << 20

func getSig() *sigHash { return sigBufs.Get().(*sigHash) }

func putSig(h *sigHash) {
	if cap(h.b) <= maxPooledSig {
		sigBufs.Put(h)
	}
}

func (s *sigHash) int(v int64) { s.b = binary.BigEndian.AppendUint64(s.b, uint64(v)) }

func (s *sigHash) bytes(b []byte) {
	s.int(int64(len(b)))
	s.b = append(s.b, b...)
}

func (s *sigHash) str(v string) {
	s.int(int64(len(v)))
	s.b = append(s.b, v...)
}

// bodySum is the digest of a metadata body in signatures: the SHA-256 of
// its canonical text (ok true), or, for a body that is not JSON the
// platform canonicalizes, of a marker and its raw bytes, so that fixing it
// still changes the signature.
func bodySum(raw []byte) (sum bodyDigest, ok bool) {
	h := getSig()
	defer putSig(h)
	if c, err := hashspec.AppendCanonical(h.b[:0], raw); err == nil {
		h.b = c
		full := sha256.Sum256(c)
		return bodyDigest(full[:len(sum)]), true
	}
	h.b = append(h.b[:0], 0xFF) // no canonical text starts with it
	h.b = append(h.b, raw...)
	full := sha256.Sum256(h.b)
	return bodyDigest(full[:len(sum)]), false
}

// bodyDigest is a body's digest kept on its node: half a SHA-256, as the
// signatures themselves.
type bodyDigest [16]byte
