package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Proposed is one proposed sys_metadata row (`reconciler validate`): a
// row as the platform would write it, or the deletion of the row it
// matches (by id, else by type, name, organization and package).
type Proposed struct {
	Row    snapshot.MetadataRow
	Delete bool
}

// ValidationItem is one entry that applying the proposal would change.
type ValidationItem struct {
	Kind   registry.Kind `json:"kind"`
	Key    string        `json:"key"`
	Action Action        `json:"action"`
	// State and Reason are the entry's state after the change (evicted:
	// none); Before is its state now ("" when new).
	State  registry.State `json:"state,omitempty"`
	Reason string         `json:"reason,omitempty"`
	Before registry.State `json:"before,omitempty"`
	// Dependent: rebuilt because something it references changed, not its
	// own row.
	Dependent bool `json:"dependent,omitempty"`
}

// Validation is what applying a proposal would do, by the loop's own
// rules, against the store as it is now.
type Validation struct {
	// Proposed counts the proposal's rows; Unmatched lists deletions that
	// match no row.
	Proposed  int              `json:"proposed"`
	Unmatched []string         `json:"unmatched"`
	Created   []ValidationItem `json:"created"`
	Rebuilt   []ValidationItem `json:"rebuilt"`
	Evicted   []ValidationItem `json:"evicted"`
	// Held are the created or rebuilt entries that would be held, with
	// their reasons.
	Held []ValidationItem `json:"held"`
	// Guarded are the evictions the eviction guard would hold back (the
	// entries would keep serving); Guard says why.
	Guarded []ValidationItem `json:"guarded"`
	Guard   GuardStatus      `json:"guard"`
	// Changes are what the loop would tell notify targets and the replica
	// driver (guarded evictions are not among them).
	Changes []Change `json:"changes"`
}

// Trips reports whether the guard would trip.
func (v Validation) Trips() bool { return len(v.Guarded) > 0 }

// Validate computes, read-only, what applying proposed to the store src
// would do: it reads the store once, builds the registries as the loop
// would from it, then applies the proposed rows the way a relist would
// see them, with opts' rules (code objects, limits, guard; materializers
// should do no I/O: a kind without one is ready). Nothing is written to
// the store; no instance outlives the call.
func Validate(ctx context.Context, src Source, opts Options, proposed []Proposed) (Validation, error) {
	opts.Notifier, opts.OnPass, opts.Metrics = nil, nil, nil
	opts.Guard.Store = nil // the replica's pending guard is not touched
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := New(src, opts)
	if r.owners != nil {
		r.owners = &readOnlyOwners{base: r.owners}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		r.shutdown(sctx)
	}()
	all, _, parsed, err := r.relistRows(ctx)
	if err != nil {
		return Validation{}, fmt.Errorf("validate: read the store: %w", err)
	}
	if _, err := r.applyAll(ctx, all, parsed); err != nil {
		return Validation{}, fmt.Errorf("validate: the store as it is: %w", err)
	}
	before := map[registry.Ref]registry.State{}
	for _, k := range registry.Kinds {
		for _, e := range r.regs.Of(k).List(nil) {
			before[registry.Ref{Kind: k, Key: e.Key}] = e.State
		}
	}
	next, own, unmatched := propose(all, proposed, r.opts)
	changes, err := r.applyAll(ctx, next, nil)
	if err != nil {
		return Validation{}, fmt.Errorf("validate: the store with the proposal: %w", err)
	}
	v := Validation{Proposed: len(proposed), Unmatched: unmatched, Changes: changes, Guard: r.Guard(),
		Created: []ValidationItem{}, Rebuilt: []ValidationItem{}, Evicted: []ValidationItem{}, Held: []ValidationItem{}, Guarded: []ValidationItem{}}
	if v.Unmatched == nil {
		v.Unmatched = []string{}
	}
	if v.Changes == nil {
		v.Changes = []Change{}
	}
	for _, c := range changes {
		ref := registry.Ref{Kind: c.Kind, Key: c.Key}
		it := ValidationItem{Kind: c.Kind, Key: c.Key, Action: c.Action, State: c.State, Before: before[ref]}
		if e, ok := r.regs.Of(c.Kind).Get(c.Key); ok && c.Action != ActionEvict {
			it.Reason = e.Reason
		}
		switch c.Action {
		case ActionCreate:
			v.Created = append(v.Created, it)
		case ActionRebuild, ActionRetry:
			it.Dependent = !own[ref]
			v.Rebuilt = append(v.Rebuilt, it)
		case ActionEvict:
			v.Evicted = append(v.Evicted, it)
		}
		if c.State == registry.StateHeld {
			v.Held = append(v.Held, it)
		}
	}
	for ref, gd := range r.guard.pending {
		v.Guarded = append(v.Guarded, ValidationItem{Kind: ref.Kind, Key: ref.Key, Action: ActionEvict, State: before[ref], Before: before[ref], Reason: gd.reason})
	}
	for _, s := range [][]ValidationItem{v.Created, v.Rebuilt, v.Evicted, v.Held, v.Guarded} {
		slices.SortFunc(s, func(a, b ValidationItem) int {
			return applyOrder(registry.Ref{Kind: a.Kind, Key: a.Key}, registry.Ref{Kind: b.Kind, Key: b.Key})
		})
	}
	return v, nil
}

// propose returns the store's rows with the proposal applied (the
// metadata rows a relist would return), the entries of the proposal's own
// rows, and the deletions that match no row.
func propose(all snapshot.Rows, proposed []Proposed, opts Options) (snapshot.Rows, map[registry.Ref]bool, []string) {
	type ident struct{ typ, name, org, pkg string }
	identOf := func(m *snapshot.MetadataRow) ident { return ident{m.Type, m.Name, m.OrganizationID, m.PackageID} }
	rows := slices.Clone(all.Metadata)
	var head int64
	for _, m := range rows {
		head = max(head, m.Revision)
	}
	for _, s := range all.Secrets {
		head = max(head, s.Revision)
	}
	for _, c := range all.Credentials {
		head = max(head, c.Revision)
	}
	find := func(p *snapshot.MetadataRow) int {
		for i := range rows {
			if (p.ID != "" && rows[i].ID == p.ID) || (p.ID == "" && identOf(&rows[i]) == identOf(p)) {
				return i
			}
		}
		return -1
	}
	own := map[registry.Ref]bool{}
	mark := func(m *snapshot.MetadataRow) {
		if n := metadataNode(m, opts.Limits); n != nil {
			own[n.ref] = true
		}
	}
	var unmatched []string
	for i, p := range proposed {
		row := p.Row
		at := find(&row)
		if p.Delete {
			if at < 0 {
				unmatched = append(unmatched, describe(row))
				continue
			}
			mark(&rows[at])
			rows = slices.Delete(rows, at, at+1)
			continue
		}
		if row.State == "" {
			row.State = "active"
		}
		row.Revision = head + int64(i) + 1
		if at >= 0 {
			mark(&rows[at]) // what it replaces changes too
			if row.ID == "" {
				row.ID = rows[at].ID
			}
			rows[at] = row
		} else {
			if row.ID == "" {
				row.ID = fmt.Sprintf("proposed-%d", i+1)
			}
			rows = append(rows, row)
		}
		mark(&row)
	}
	next := snapshot.Rows{Secrets: all.Secrets, Credentials: all.Credentials}
	for _, m := range rows {
		if m.State == "active" {
			next.Metadata = append(next.Metadata, m)
		}
	}
	return next, own, unmatched
}

// describe names a proposed row for people.
func describe(m snapshot.MetadataRow) string {
	s := m.Type + "/" + m.Name
	if m.OrganizationID != "" {
		s = m.OrganizationID + ":" + s
	}
	if m.PackageID != "" {
		s += "@" + m.PackageID
	}
	if m.ID != "" {
		s += " (id " + m.ID + ")"
	}
	return s
}

// readOnlyOwners reads the store's credential bindings and records new
// ones in memory only (validate writes nothing).
type readOnlyOwners struct {
	base  CredentialOwners
	bound map[string]string
}

func (o *readOnlyOwners) CredentialOwners(ctx context.Context) (map[string]string, error) {
	m, err := o.base.CredentialOwners(ctx)
	if err != nil {
		return nil, err
	}
	if o.bound == nil {
		o.bound = map[string]string{}
		for k, v := range m {
			o.bound[k] = v
		}
	}
	out := make(map[string]string, len(o.bound))
	for k, v := range o.bound {
		out[k] = v
	}
	return out, nil
}

func (o *readOnlyOwners) BindCredential(_ context.Context, ref, org string) (string, error) {
	if o.bound == nil {
		o.bound = map[string]string{}
	}
	if cur, ok := o.bound[ref]; ok {
		return cur, nil
	}
	o.bound[ref] = org
	return org, nil
}

func (o *readOnlyOwners) UnbindCredential(_ context.Context, ref, org string) error {
	if o.bound[ref] == org {
		delete(o.bound, ref)
	}
	return nil
}
