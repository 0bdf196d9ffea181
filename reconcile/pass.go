package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// rowOf points at the source row of one entry.
type rowOf struct {
	meta *snapshot.MetadataRow
	ds   *snapshot.DatasourceRow
	cred *snapshot.CredentialRow
}

// rowSet indexes rows by address.
type rowSet map[snapshot.Address]rowOf

func (s rowSet) add(rows snapshot.Rows) {
	for i := range rows.Credentials {
		c := &rows.Credentials[i]
		s[snapshot.Address{Table: snapshot.TableCredential, Key: c.Ref}] = rowOf{cred: c}
	}
	for i := range rows.Metadata {
		m := &rows.Metadata[i]
		s[snapshot.Address{Table: snapshot.TableMetadata, Key: m.ID}] = rowOf{meta: m}
	}
	for i := range rows.Datasources {
		d := &rows.Datasources[i]
		s[snapshot.Address{Table: snapshot.TableDatasource, Key: d.Name}] = rowOf{ds: d}
	}
}

// nodeFor builds the node of a row against model m (nil: not desired).
func nodeFor(row rowOf, m *model) *node {
	switch {
	case row.cred != nil:
		return credentialNode(row.cred)
	case row.meta != nil:
		return metadataNode(row.meta)
	case row.ds != nil:
		return datasourceNode(row.ds, func(name string) string {
			if n := m.nodes[registry.Ref{Kind: registry.KindConnector, Key: name}]; n != nil {
				return n.credentialOf()
			}
			return ""
		})
	}
	return nil
}

// tableOrder processes credentials, then metadata (connectors), then
// datasources, so a datasource sees its borrowed connector's new node.
var tableOrder = []snapshot.Table{snapshot.TableCredential, snapshot.TableMetadata, snapshot.TableDatasource}

// buildModel builds the whole desired model from a relist: credentials,
// then metadata (parsed on every core), then datasources, which resolve
// the connectors they borrow from.
func buildModel(all snapshot.Rows) *model {
	m := newModel()
	put := func(n *node) {
		if n == nil {
			return
		}
		if old, ok := m.nodes[n.ref]; ok && old.rev > n.rev {
			return // two rows claim one key: the newer wins
		}
		m.put(n)
	}
	for i := range all.Credentials {
		put(credentialNode(&all.Credentials[i]))
	}
	metas := make([]*node, len(all.Metadata))
	parallel(len(metas), func(i int) { metas[i] = metadataNode(&all.Metadata[i]) })
	for _, n := range metas {
		put(n)
	}
	for i := range all.Datasources {
		put(nodeFor(rowOf{ds: &all.Datasources[i]}, m))
	}
	return m
}

// pass runs one pass. It returns an error only when the store failed; the
// cursor then stays where it was.
func (r *Reconciler) pass(ctx context.Context, trig Trigger, relist bool) error {
	start := time.Now()
	res := PassResult{Trigger: trig, At: start, Relist: relist}
	var err error
	if relist {
		res.Changes, err = r.relistPass(ctx, trig)
	} else {
		res.Changes, err = r.pollPass(ctx, &res)
	}
	res.Duration = time.Since(start)
	res.Cursor = r.cursor
	r.metrics.Passes.WithLabelValues(string(res.Trigger)).Inc()
	if err != nil {
		r.metrics.StoreErrors.Inc()
		res.Err = err.Error()
		r.log.WarnContext(ctx, "pass failed", slog.String("trigger", string(trig)), slog.String("error", err.Error()))
	}
	if len(res.Changes) > 0 {
		r.metrics.PassDuration.Observe(res.Duration.Seconds())
		if r.opts.Notifier != nil {
			r.opts.Notifier.Notify(ChangeSet{Replica: r.opts.ReplicaID, Cursor: r.cursor.String(), Changes: res.Changes})
		}
	}
	if err == nil && time.Since(r.lastStall) >= r.opts.StallAge {
		r.refreshStall(ctx)
	}
	r.mu.Lock()
	r.status.StoreUp = err == nil
	if err != nil {
		r.status.LastError = res.Err
	} else {
		r.status.LastError = ""
		r.status.Cursor = r.cursor
	}
	r.status.Passes++
	lp := res
	r.status.LastPass = &lp
	r.mu.Unlock()
	if !r.cursor.At.IsZero() {
		r.metrics.CursorLag.Set(time.Since(r.cursor.At).Seconds())
	}
	if r.opts.OnPass != nil {
		r.opts.OnPass(res)
	}
	return err
}

func (r *Reconciler) refreshStall(ctx context.Context) {
	r.lastStall = time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := r.src.Stall(sctx, r.cursor, r.opts.StallAge)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.status.Stall = st
	r.mu.Unlock()
}

// pollPass polls the journal and applies what changed. An expired or
// regressed cursor turns it into a relist.
func (r *Reconciler) pollPass(ctx context.Context, res *PassResult) ([]Change, error) {
	t0 := time.Now()
	addrs, next, err := r.src.Poll(ctx, r.cursor)
	r.metrics.PollDuration.Observe(time.Since(t0).Seconds())
	switch {
	case errors.Is(err, snapshot.ErrCursorExpired):
		r.log.WarnContext(ctx, "cursor expired, relisting", slog.String("cursor", r.cursor.String()))
		res.Relist, res.Trigger = true, TriggerExpired
		return r.relistPass(ctx, TriggerExpired)
	case errors.Is(err, snapshot.ErrCursorRegressed):
		r.log.WarnContext(ctx, "store watermark went backwards, relisting", slog.String("cursor", r.cursor.String()))
		res.Relist, res.Trigger = true, TriggerRegressed
		return r.relistPass(ctx, TriggerRegressed)
	case err != nil:
		return nil, fmt.Errorf("poll after %s: %w", r.cursor, err)
	}
	now := time.Now()
	var forced map[registry.Ref]bool
	for ref, at := range r.retries {
		if !at.After(now) {
			if forced == nil {
				forced = make(map[registry.Ref]bool)
			}
			forced[ref] = true
		}
	}
	if len(addrs) == 0 && len(forced) == 0 {
		r.cursor = next
		return nil, nil
	}
	changes, err := r.applyDelta(ctx, addrs, forced)
	if err != nil {
		return changes, err
	}
	r.cursor = next
	return changes, nil
}

// applyDelta re-reads the changed rows, updates the model and applies the
// changed entries and their dependents.
func (r *Reconciler) applyDelta(ctx context.Context, addrs []snapshot.Address, forced map[registry.Ref]bool) ([]Change, error) {
	rows := make(rowSet, len(addrs))
	if len(addrs) > 0 {
		got, err := r.src.Read(ctx, addrs)
		if err != nil {
			return nil, fmt.Errorf("read %d changed rows: %w", len(addrs), err)
		}
		rows.add(got)
	}
	seen := make(map[snapshot.Address]bool, len(addrs))
	affected := make(map[registry.Ref]bool)
	for _, t := range tableOrder {
		for _, addr := range addrs {
			if addr.Table != t || seen[addr] {
				continue
			}
			seen[addr] = true
			oldRef, had := r.model.byAddr[addr]
			var n *node
			if row, ok := rows[addr]; ok {
				n = nodeFor(row, r.model)
			}
			if had && (n == nil || n.ref != oldRef) {
				r.model.remove(oldRef)
				affected[oldRef] = true
			}
			if n == nil {
				continue
			}
			old := r.model.nodes[n.ref]
			if old != nil && old.addr != addr && old.rev > n.rev {
				continue // another row claims this key with a newer revision
			}
			if old == nil || old.rev != n.rev || old.cleared != n.cleared || !sameRefs(old.deps, n.deps) {
				affected[n.ref] = true
			}
			r.model.put(n)
		}
	}
	dirty := make(map[registry.Ref]bool, len(affected)+len(forced))
	for ref := range affected {
		dirty[ref] = true
		for dep := range r.model.dependents[ref] {
			dirty[dep] = true
		}
	}
	for ref := range forced {
		dirty[ref] = true
	}
	if err := r.readMissing(ctx, dirty, rows); err != nil {
		// The model already moved ahead of the registries: re-polling the
		// same addresses would not find the dependents again, so relist.
		r.relistReason = TriggerRecovered
		return nil, err
	}
	return r.apply(ctx, dirty, rows, forced), nil
}

// readMissing reads the rows of dirty entries and the credentials they
// resolve that are not in rows yet, refreshing their nodes.
func (r *Reconciler) readMissing(ctx context.Context, dirty map[registry.Ref]bool, rows rowSet) error {
	for round := 0; round < 2; round++ {
		var need []snapshot.Address
		want := func(a snapshot.Address) {
			if _, ok := rows[a]; !ok {
				rows[a] = rowOf{} // placeholder: asked for
				need = append(need, a)
			}
		}
		for ref := range dirty {
			n := r.model.nodes[ref]
			if n == nil {
				continue
			}
			want(n.addr)
			if c := n.credentialOf(); c != "" && ref.Kind != registry.KindCredential {
				want(snapshot.Address{Table: snapshot.TableCredential, Key: c})
			}
		}
		if len(need) == 0 {
			break
		}
		got, err := r.src.Read(ctx, need)
		if err != nil {
			for _, a := range need {
				delete(rows, a)
			}
			return fmt.Errorf("read %d dependent rows: %w", len(need), err)
		}
		rows.add(got)
		// Refresh the dependencies of re-read dependents (a datasource's
		// borrowed credential may have moved), but only where the row is
		// still at the revision the model knows: a row that changed since
		// the poll keeps its model node until its own journal entry comes,
		// which then marks it and its dependents affected. Moving the node
		// here would make that entry look like a duplicate and lose it.
		for _, a := range need {
			row := rows[a]
			ref, ok := r.model.byAddr[a]
			if !ok || (row == rowOf{}) {
				continue
			}
			if n := nodeFor(row, r.model); n != nil && n.ref == ref && n.rev == r.model.nodes[ref].rev {
				r.model.put(n)
			}
		}
	}
	return nil
}

// relistPass reads every row, rebuilds the model and applies every entry
// whose signature changed, evicting what is no longer desired.
func (r *Reconciler) relistPass(ctx context.Context, trig Trigger) ([]Change, error) {
	all, cur, err := r.src.Relist(ctx)
	if err != nil {
		r.relistReason = trig
		return nil, fmt.Errorf("relist (%s): %w", trig, err)
	}
	r.metrics.Relists.WithLabelValues(string(trig)).Inc()
	rows := make(rowSet, all.Len())
	rows.add(all)
	r.model = buildModel(all)
	dirty := make(map[registry.Ref]bool, len(r.model.nodes))
	for ref := range r.model.nodes {
		dirty[ref] = true
	}
	for _, k := range registry.Kinds {
		for _, key := range r.regs.Of(k).Keys() {
			dirty[registry.Ref{Kind: k, Key: key}] = true
		}
	}
	changes := r.apply(ctx, dirty, rows, nil)
	r.cursor = cur
	r.relistReason = ""
	r.markSynced()
	return changes, nil
}

func sameRefs(a, b []registry.Ref) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
