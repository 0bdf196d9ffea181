package reconcile

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// How a reference resolved (Reference.Resolved).
const (
	ResolvedOrg     = "org"         // the row of the referrer's organization
	ResolvedOrgLess = "org-less"    // the row without an organization
	ResolvedCode    = "code object" // an object the platform defines in code
	ResolvedMissing = "missing"     // nothing answers: the referrer is held
)

// Reference is one reference of an entry and how it resolved.
type Reference struct {
	// Kind is the registry the reference resolves in.
	Kind registry.Kind `json:"kind"`
	// Type is the metadata type referenced (engine references only).
	Type string `json:"type,omitempty"`
	// Name is the name as the body gives it (a credential: its ref or
	// "sys_secret:<id>").
	Name string `json:"name"`
	// Resolved is how: ResolvedOrg, ResolvedOrgLess, ResolvedCode or
	// ResolvedMissing.
	Resolved string `json:"resolved"`
	// Key is the entry it resolved to ("" when missing or in code).
	Key string `json:"key,omitempty"`
	// Package is the package of the row it resolved to, if any.
	Package string `json:"package,omitempty"`
	// Candidates counts the rows answering to the name, when more than
	// one did (organizations and packages decide among them).
	Candidates int `json:"candidates,omitempty"`
	// Revision and State are the target entry's.
	Revision int64          `json:"revision,omitempty"`
	State    registry.State `json:"state,omitempty"`
}

// Dependent is a direct referrer of an entry.
type Dependent struct {
	Kind  registry.Kind  `json:"kind"`
	Key   string         `json:"key"`
	State registry.State `json:"state,omitempty"`
}

// Row is the source row of an entry as the store has it now.
type Row struct {
	Table    snapshot.Table `json:"table"`
	ID       string         `json:"id"`
	Revision int64          `json:"revision"`
	State    string         `json:"state,omitempty"` // sys_metadata: the platform's lifecycle state
	Version  float64        `json:"version,omitempty"`
	Checksum string         `json:"checksum,omitempty"`
	// Withheld is the size of a body above the store's read cap (not
	// read); 0 when it was read.
	Withheld int64 `json:"withheld,omitempty"`
	// Fault is why the body cannot be used, if it cannot.
	Fault string `json:"fault,omitempty"`
	// Gone: the row was not found (deleted since the entry was built).
	Gone bool `json:"gone,omitempty"`
	// Beside are the rows of the same type, name, organization and
	// package in another state (a draft waiting to be promoted, an
	// archived copy), when the store can tell.
	Beside []BesideRow `json:"beside,omitempty"`
}

// BesideRow is a sys_metadata row beside an entry's own.
type BesideRow struct {
	ID       string  `json:"id"`
	State    string  `json:"state"`
	Revision int64   `json:"revision"`
	Version  float64 `json:"version,omitempty"`
}

// Explanation is everything known about one entry: GET /v1/item.
type Explanation struct {
	registry.Entry
	// Row is the entry's source row (absent for an entry no row wants
	// any longer, about to be evicted).
	Row *Row `json:"row,omitempty"`
	// References are the entry's references and how each resolved
	// (always present, possibly empty).
	References []Reference `json:"references"`
	// Dependents are the entries referring to this one directly (it
	// excluded), by kind then key.
	Dependents []Dependent `json:"dependents"`
	// NextRetry is when a degraded entry is retried next.
	NextRetry time.Time `json:"next_retry,omitzero"`
	// Remedy says what would change the entry's state, for a non-ready one.
	Remedy string `json:"remedy,omitempty"`
	// History is the entry's last transitions, oldest first (at most
	// registry.HistoryLen; the first is its creation while it has fewer).
	History []registry.Transition `json:"history"`
}

// Explain explains the entry of kind k under key (ok false: no such
// entry). It reads the entry's row from the store (one read); a store
// that cannot be read leaves Row out. Safe to call from any goroutine.
func (r *Reconciler) Explain(ctx context.Context, k registry.Kind, key string) (Explanation, bool) {
	reg := r.regs.Of(k)
	if reg == nil {
		return Explanation{}, false
	}
	e, ok := reg.Get(key)
	if !ok {
		return Explanation{}, false
	}
	x := Explanation{Entry: e, References: []Reference{}, Dependents: []Dependent{}, History: e.History.List()}
	if e.State == registry.StateDegraded {
		x.NextRetry = e.RetryAt
	}
	ref := registry.Ref{Kind: k, Key: key}
	var addr snapshot.Address
	var fault string
	r.modelMu.RLock()
	n := r.model.nodes[ref]
	if n != nil {
		addr, fault = n.addr, n.fault
		x.References = r.references(n)
		x.Dependents = r.dependents(n)
	}
	r.modelMu.RUnlock()
	if n != nil {
		x.Row = r.readRow(ctx, addr, fault)
	}
	x.Remedy = remedy(x)
	return x, true
}

// ExplainKey explains every entry under key, of any kind, in apply order.
func (r *Reconciler) ExplainKey(ctx context.Context, key string) []Explanation {
	var out []Explanation
	for _, k := range registry.Kinds {
		if x, ok := r.Explain(ctx, k, key); ok {
			out = append(out, x)
		}
	}
	return out
}

// references lists how each reference of n resolves (modelMu held).
func (r *Reconciler) references(n *node) []Reference {
	out := make([]Reference, 0, len(n.wants))
	for _, w := range n.wants {
		ref := Reference{Kind: w.kind, Type: w.typ, Name: w.name}
		if w.kind == registry.KindCredential {
			ref.Name = credentialName(w.name)
		}
		if c := len(r.model.bySym[w.sym]); c > 1 {
			ref.Candidates = c
		}
		dn, ok := r.model.resolveNode(n, w)
		switch {
		case !ok:
			ref.Resolved = ResolvedMissing
		case dn == nil:
			ref.Resolved = ResolvedCode
		default:
			ref.Resolved = ResolvedOrgLess
			if dn.org != "" {
				ref.Resolved = ResolvedOrg
			}
			ref.Key, ref.Package, ref.Revision = dn.ref.Key, dn.pkg, dn.rev
			if te, ok := r.regs.Of(dn.ref.Kind).Get(dn.ref.Key); ok {
				ref.State = te.State
			}
		}
		out = append(out, ref)
	}
	return out
}

// dependents lists the entries whose references resolve to n, n excluded
// (modelMu held).
func (r *Reconciler) dependents(n *node) []Dependent {
	out := []Dependent{}
	for dep := range r.model.dependents[n.sym] {
		if dep == n.ref {
			continue
		}
		dn := r.model.nodes[dep]
		if dn == nil || !r.resolvesTo(dn, n) {
			continue // refers to another row of that name (another organization)
		}
		d := Dependent{Kind: dep.Kind, Key: dep.Key}
		if e, ok := r.regs.Of(dep.Kind).Get(dep.Key); ok {
			d.State = e.State
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Dependent) int {
		return applyOrder(registry.Ref{Kind: a.Kind, Key: a.Key}, registry.Ref{Kind: b.Kind, Key: b.Key})
	})
	return out
}

// resolvesTo reports whether one of dn's references resolves to n.
func (r *Reconciler) resolvesTo(dn, n *node) bool {
	for _, w := range dn.wants {
		if w.sym != n.sym {
			continue
		}
		if t, ok := r.model.resolveNode(dn, w); ok && t == n {
			return true
		}
	}
	return false
}

// namedReader reads every sys_metadata row of a type and name (a
// snapshot.Store does): explain shows the rows beside an entry's own.
type namedReader interface {
	MetadataNamed(ctx context.Context, typ, name string) ([]snapshot.MetadataRow, error)
}

// readRow reads the row at addr now (nil: the store could not be read).
func (r *Reconciler) readRow(ctx context.Context, addr snapshot.Address, fault string) *Row {
	row := &Row{Table: addr.Table, ID: addr.Key, Fault: fault}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := r.src.Read(rctx, []snapshot.Address{addr})
	if err != nil {
		return nil
	}
	s := make(rowSet, 1)
	s.add(got)
	cur, ok := s[addr]
	switch {
	case !ok:
		row.Gone = true
	case cur.meta != nil:
		m := cur.meta
		row.Revision, row.State, row.Version, row.Checksum, row.Withheld = m.Revision, m.State, m.Version, m.Checksum, m.Withheld
		if named, ok := r.src.(namedReader); ok {
			if all, err := named.MetadataNamed(rctx, m.Type, m.Name); err == nil {
				for _, o := range all {
					if o.ID != m.ID && o.State != "active" && o.OrganizationID == m.OrganizationID && o.PackageID == m.PackageID {
						row.Beside = append(row.Beside, BesideRow{ID: o.ID, State: o.State, Revision: o.Revision, Version: o.Version})
					}
				}
			}
		}
	default:
		row.Revision = cur.revision()
	}
	return row
}

// remedy says what would move a non-ready entry on.
func remedy(x Explanation) string {
	switch x.State {
	case registry.StateReady:
		return ""
	case registry.StatePending:
		return "wait for the pass in flight to try it"
	case registry.StateDegraded:
		at := "at next_retry"
		if !x.NextRetry.IsZero() {
			at = "at " + x.NextRetry.UTC().Format(time.RFC3339)
		}
		return "retried by itself " + at + " (backoff); `reconciler retry` tries it now"
	}
	var missing []string
	heldBy := ""
	for _, ref := range x.References {
		switch {
		case ref.Resolved == ResolvedMissing:
			missing = append(missing, refLabel(ref))
		case ref.State == registry.StateHeld && heldBy == "":
			heldBy = refLabel(ref)
		}
	}
	switch {
	case len(missing) > 0:
		return "create " + strings.Join(missing, ", ") + " (active, in this organization or none), or fix the reference in the body; the entry is rebuilt by itself then"
	case x.Row != nil && x.Row.Fault != "":
		return "fix the row's body; the entry is rebuilt by itself then"
	case heldBy != "":
		return "fix " + heldBy + " (held: see its explanation); this entry follows by itself"
	case x.Kind == registry.KindCredential:
		return "give the credential a value this reconciler can use; its users follow by itself"
	}
	return "fix what the reason names; a fix in the rows applies by itself, a fix outside them (upstream, network) needs `reconciler retry` (held entries have no retry timer)"
}

func refLabel(ref Reference) string {
	if ref.Type != "" {
		return ref.Type + " " + ref.Name
	}
	return string(ref.Kind) + " " + ref.Name
}

// RootCause is what holds a set of held entries: a missing reference, a
// held credential they use (directly or through a connector), or (for an
// entry held by its own failure) the entry itself.
type RootCause struct {
	// Cause names it: "missing object Account", "connector crm", …
	Cause string `json:"cause"`
	// Kind and Key are the entry that is the cause, when it is one (not
	// for a missing reference).
	Kind registry.Kind `json:"kind,omitempty"`
	Key  string        `json:"key,omitempty"`
	// Reason is that entry's reason.
	Reason string `json:"reason,omitempty"`
	// Held are the held entries it holds ("kind/key"), sorted; an entry
	// held by two causes is under both.
	Held []string `json:"held"`
}

// RootCauses collapses the held entries onto what holds them, the causes
// holding most first. Safe to call from any goroutine.
func (r *Reconciler) RootCauses() []RootCause {
	held := r.regs.List("", registry.StateHeld)
	byCause := map[string]*RootCause{}
	add := func(c RootCause, who registry.Ref) {
		rc := byCause[c.Cause]
		if rc == nil {
			rc = &c
			byCause[c.Cause] = rc
		}
		rc.Held = append(rc.Held, who.String())
	}
	r.modelMu.RLock()
	for _, e := range held {
		ref := registry.Ref{Kind: e.Kind, Key: e.Key}
		n := r.model.nodes[ref]
		if n == nil {
			add(RootCause{Cause: string(e.Kind) + " " + e.Key, Kind: e.Kind, Key: e.Key, Reason: e.Reason}, ref)
			continue
		}
		found := false
		// A held credential holds its users (and, through a connector,
		// the datasources borrowing it); a held metadata item holds no
		// referrer (it still resolves): only what is missing does.
		heldCred := func(from *node, w want) {
			if cn, ok := r.model.resolveNode(from, w); ok && cn != nil && cn.hold != "" {
				add(RootCause{Cause: "credential " + credentialName(w.name), Kind: registry.KindCredential, Key: cn.ref.Key, Reason: cn.hold}, ref)
				found = true
			}
		}
		for _, w := range n.wants {
			dn, ok := r.model.resolveNode(n, w)
			switch {
			case !ok:
				add(RootCause{Cause: "missing " + w.reference().String()}, ref)
				found = true
			case w.kind == registry.KindCredential:
				heldCred(n, w)
			case w.kind == registry.KindConnector && dn != nil:
				for _, cw := range dn.wants {
					if cw.kind == registry.KindCredential {
						heldCred(dn, cw)
					}
				}
			}
		}
		if !found {
			add(RootCause{Cause: string(e.Kind) + " " + e.Key, Kind: e.Kind, Key: e.Key, Reason: e.Reason}, ref)
		}
	}
	r.modelMu.RUnlock()
	out := make([]RootCause, 0, len(byCause))
	for _, rc := range byCause {
		sort.Strings(rc.Held)
		out = append(out, *rc)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i].Held) != len(out[j].Held) {
			return len(out[i].Held) > len(out[j].Held)
		}
		return out[i].Cause < out[j].Cause
	})
	return out
}
