package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// sourceRow points at the row one entry comes from: a metadata, secret or
// credential row of the Source.
type sourceRow struct {
	meta   *snapshot.MetadataRow
	secret *snapshot.SecretRow
	cred   *snapshot.CredentialRow
}

// rowSet indexes rows by address.
type rowSet map[snapshot.Address]sourceRow

// find is the row of n in s.
func (s rowSet) find(n *node) (sourceRow, bool) {
	row, ok := s[n.addr]
	return row, ok
}

// relisted finds the row of a node built from all by buildModel.
func relisted(all *snapshot.Rows) func(n *node) (sourceRow, bool) {
	return func(n *node) (sourceRow, bool) {
		if n.at < 0 { // a guarded entry's ghost: no row
			return sourceRow{}, false
		}
		switch n.addr.Table {
		case snapshot.TableMetadata:
			return sourceRow{meta: &all.Metadata[n.at]}, true
		case snapshot.TableSecret:
			return sourceRow{secret: &all.Secrets[n.at]}, true
		case snapshot.TableCredential:
			return sourceRow{cred: &all.Credentials[n.at]}, true
		}
		return sourceRow{}, false
	}
}

func (s rowSet) add(rows snapshot.Rows) {
	for i := range rows.Credentials {
		c := &rows.Credentials[i]
		s[snapshot.Address{Table: snapshot.TableCredential, Key: c.Ref}] = sourceRow{cred: c}
	}
	for i := range rows.Secrets {
		c := &rows.Secrets[i]
		s[snapshot.Address{Table: snapshot.TableSecret, Key: c.ID}] = sourceRow{secret: c}
	}
	for i := range rows.Metadata {
		m := &rows.Metadata[i]
		s[snapshot.Address{Table: snapshot.TableMetadata, Key: m.ID}] = sourceRow{meta: m}
	}
}

// nodeFor builds the node of a row (nil: not desired).
func (r *Reconciler) nodeFor(row sourceRow) *node {
	switch {
	case row.cred != nil:
		return credentialNode(row.cred)
	case row.secret != nil:
		return secretNode(row.secret, r.opts.Secrets)
	case row.meta != nil:
		return metadataNode(row.meta, r.opts.Limits)
	}
	return nil
}

// buildModel builds the whole desired model from a relist, parsing bodies
// and decrypting secrets on every core. parsed, when it has one node per
// metadata row, holds their nodes already (relistRows).
func (r *Reconciler) buildModel(all snapshot.Rows, parsed []*node) *model {
	ns := make([]*node, len(all.Credentials)+len(all.Secrets)+len(all.Metadata))
	for i := range all.Credentials {
		ns[i] = credentialNode(&all.Credentials[i])
		ns[i].at = i
	}
	secrets := ns[len(all.Credentials) : len(all.Credentials)+len(all.Secrets)]
	parallel(len(secrets), func(i int) {
		if secrets[i] = secretNode(&all.Secrets[i], r.opts.Secrets); secrets[i] != nil {
			secrets[i].at = i
		}
	})
	metas := ns[len(all.Credentials)+len(all.Secrets):]
	parallel(len(metas), func(i int) {
		if len(parsed) == len(metas) {
			metas[i] = parsed[i]
		} else {
			metas[i] = metadataNode(&all.Metadata[i], r.opts.Limits)
		}
		if metas[i] != nil {
			metas[i].at = i
		}
	})
	m := newModel(r.opts.CodeObjects, len(ns))
	m.putAll(ns)
	return m
}

// pass runs one pass. It returns an error only when the store failed; the
// cursor then stays where it was.
func (r *Reconciler) pass(ctx context.Context, cause Cause, relist bool) error {
	r.land(ctx)
	start := time.Now()
	res := PassResult{Cause: cause, At: start, Relist: relist}
	var err error
	if relist {
		res.Changes, err = r.relistPass(ctx, cause)
	} else {
		res.Changes, err = r.pollPass(ctx, &res)
	}
	if err == nil {
		res.Changes = append(res.Changes, r.guardPass(ctx)...)
	}
	res.Duration = time.Since(start)
	res.Cursor = r.cursor
	r.metrics.Passes.WithLabelValues(string(res.Cause)).Inc()
	if err != nil {
		r.metrics.StoreErrors.Inc()
		res.Err = err.Error()
		r.log.WarnContext(ctx, "pass failed", slog.String("trigger", string(cause)), slog.String("error", err.Error()))
	}
	if len(res.Changes) > 0 {
		r.metrics.PassDuration.Observe(res.Duration.Seconds())
		if r.opts.Notifier != nil {
			r.opts.Notifier.Notify(ChangeSet{ReplicaID: r.opts.ReplicaID, Cursor: r.cursor.String(), Changes: res.Changes,
				StoreAt: r.cursor.At, PolledAt: r.polledAt})
		}
	}
	// The stall check is a store call too: one that fails (a path that
	// died right after the poll) reports the store down now, not at the
	// next poll, so a dead path shows within postgres.DeadPathBound.
	var stallErr error
	if err == nil && time.Since(r.lastStall) >= r.opts.StallAge {
		stallErr = r.refreshStall(ctx)
	}
	if err == nil && stallErr == nil {
		stallErr = r.checkSchema(ctx)
	}
	r.mu.Lock()
	r.status.StoreUp = err == nil && stallErr == nil
	switch {
	case err != nil:
		r.status.LastError = res.Err
	case stallErr != nil:
		r.status.LastError = stallErr.Error()
		r.status.Cursor = r.cursor
	default:
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
	if r.retryQ.pending() && err == nil {
		r.signal(flagRetry) // asked for during a relist: a poll pass takes them
	}
	return err
}

// refreshStall checks for stalled changes. It returns an error when the
// store could not be reached (snapshot.ErrUnavailable; a check that fails
// otherwise only keeps the previous result; nil when the loop is stopping).
func (r *Reconciler) refreshStall(ctx context.Context) error {
	r.lastStall = time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := r.src.Stall(sctx, r.cursor, r.opts.StallAge)
	if err != nil {
		if ctx.Err() != nil || !errors.Is(err, snapshot.ErrUnavailable) {
			return nil
		}
		r.metrics.StoreErrors.Inc()
		return fmt.Errorf("stall check: %w", err)
	}
	r.mu.Lock()
	r.status.Stall = st
	r.mu.Unlock()
	return nil
}

// pollPass polls the journal and applies what changed. An expired or
// regressed cursor turns it into a relist.
func (r *Reconciler) pollPass(ctx context.Context, res *PassResult) ([]Change, error) {
	t0 := time.Now()
	addrs, next, err := r.src.Poll(ctx, r.cursor)
	polled := time.Now()
	r.metrics.PollDuration.Observe(polled.Sub(t0).Seconds())
	switch {
	case errors.Is(err, snapshot.ErrCursorExpired):
		r.log.WarnContext(ctx, "cursor expired, relisting", slog.String("cursor", r.cursor.String()))
		res.Relist, res.Cause = true, CauseExpired
		return r.relistPass(ctx, CauseExpired)
	case errors.Is(err, snapshot.ErrCursorRegressed):
		r.log.WarnContext(ctx, "store watermark went backwards, relisting", slog.String("cursor", r.cursor.String()))
		res.Relist, res.Cause = true, CauseRegressed
		return r.relistPass(ctx, CauseRegressed)
	case err != nil:
		return nil, fmt.Errorf("poll after %s: %w", r.cursor, err)
	}
	if r.model.touchesShared(addrs) {
		// A row of a key other rows claim too changed: only a relist
		// knows which of them wins now (a delete must not evict the key
		// while another row still claims it).
		res.Relist, res.Cause = true, CauseRecovered
		return r.relistPass(ctx, CauseRecovered)
	}
	now := time.Now()
	var forced map[registry.Ref]bool
	for ref, at := range r.retries {
		if !at.After(now) {
			if forced == nil {
				forced = make(map[registry.Ref]bool)
			}
			forced[ref] = true
			r.metrics.Retries.WithLabelValues(string(ref.Kind), RetryBackoff).Inc()
		}
	}
	for ref, until := range r.waits {
		select {
		case <-until:
			if forced == nil {
				forced = make(map[registry.Ref]bool)
			}
			forced[ref] = true
			delete(r.waits, ref)
		default:
		}
	}
	forced, asked := r.takeRetries(forced)
	defer r.retried(asked) // once applied (or failed: the callers look again)
	addrs = r.takeRereads(addrs)
	if len(addrs) == 0 && len(forced) == 0 {
		r.cursor, r.polledAt = next, polled
		return nil, nil
	}
	changes, err := r.applyDelta(ctx, addrs, forced)
	if err != nil {
		return changes, err
	}
	r.cursor, r.polledAt = next, polled
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
		r.setRevision(max(r.revision(), maxRevision(got)))
		rows.add(got)
	}
	seen := make(map[snapshot.Address]bool, len(addrs))
	affected := make(map[registry.Ref]bool)
	syms := make(map[string]bool)  // symbols whose candidates changed
	creds := make(map[string]bool) // connector credentials named by a changed row
	named := func(n *node) {
		for _, w := range n.wants {
			if w.kind == registry.KindCredential && !isSecretKey(w.name) {
				creds[w.name] = true
			}
		}
	}
	var gone []evictionCand // entries whose rows went
	r.modelMu.Lock()
	for _, addr := range addrs {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		oldRef, had := r.model.byAddr[addr]
		var n *node
		if row, ok := rows[addr]; ok {
			n = r.nodeFor(row)
		}
		if had && (n == nil || n.ref != oldRef) {
			old := r.model.nodes[oldRef]
			if old != nil {
				syms[old.sym] = true
				named(old)
			}
			r.model.remove(oldRef)
			affected[oldRef] = true
			gone = append(gone, evictionCand{ref: oldRef, old: old})
		}
		if n == nil {
			continue
		}
		if n.deferred {
			r.rereads[addr] = true // its body comes with a later read (memory.go)
		}
		old := r.model.nodes[n.ref]
		if old != nil && old.addr != addr {
			r.model.shareKey(n.ref, old.addr, addr)
			if old.rev > n.rev {
				continue // another row claims this key with a newer revision
			}
		}
		if old == nil || old.rev != n.rev || old.hold != n.hold || old.fault != n.fault || old.deferred != n.deferred || !sameWants(old.wants, n.wants) {
			affected[n.ref] = true
			syms[n.sym] = true
			if old != nil {
				named(old)
			}
			named(n)
		}
		r.model.put(n)
	}
	// Entries whose rows went and whose key no row claims now are
	// evictions: the guard may keep them (as ghosts in the model).
	gone = slices.DeleteFunc(gone, func(c evictionCand) bool { return r.model.nodes[c.ref] != nil })
	r.modelMu.Unlock()
	r.guardEvictions(ctx, gone)
	if len(creds) > 0 {
		rebound, err := r.settleOwners(ctx, creds)
		if err != nil {
			r.relistCause = CauseRecovered // the model moved ahead of the registries
			return nil, err
		}
		for _, key := range rebound {
			syms[symOf(registry.KindCredential, "", key)] = true
		}
	}
	dirty := make(map[registry.Ref]bool, len(affected)+len(forced))
	for ref := range affected {
		dirty[ref] = true
	}
	r.model.markDependents(syms, dirty)
	for ref := range forced {
		dirty[ref] = true
	}
	if err := r.readMissing(ctx, dirty, rows); err != nil {
		// The model already moved ahead of the registries: re-polling the
		// same addresses would not find the dependents again, so relist.
		r.relistCause = CauseRecovered
		return nil, err
	}
	refs := make([]target, 0, len(dirty))
	for ref := range dirty {
		refs = append(refs, target{ref: ref})
	}
	return r.apply(ctx, refs, rows.find, forced), nil
}

// readMissing reads the rows of dirty entries that are not in rows yet.
func (r *Reconciler) readMissing(ctx context.Context, dirty map[registry.Ref]bool, rows rowSet) error {
	var need []snapshot.Address
	for ref := range dirty {
		n := r.model.nodes[ref]
		if n == nil {
			continue
		}
		if _, ok := rows[n.addr]; !ok {
			need = append(need, n.addr)
		}
	}
	if len(need) == 0 {
		return nil
	}
	got, err := r.src.Read(ctx, need)
	if err != nil {
		return fmt.Errorf("read %d dependent rows: %w", len(need), err)
	}
	rows.add(got)
	return nil
}

// relistPass reads every row, rebuilds the model and applies every entry
// whose signature changed, evicting what is no longer desired.
func (r *Reconciler) relistPass(ctx context.Context, cause Cause) ([]Change, error) {
	restoreGC := func() {}
	if !r.isSynced() { // the first full sync: the collector may run less (gc.go)
		restoreGC = raiseGC(r.opts.SyncGCPercent)
	}
	all, cur, parsed, err := r.relistRows(ctx)
	polled := time.Now()
	if err == nil {
		err = r.loadGuard(ctx) // once, before the first relist applies
	}
	if err != nil {
		restoreGC()
		r.relistCause = cause
		return nil, fmt.Errorf("relist (%s): %w", cause, err)
	}
	r.metrics.Relists.WithLabelValues(string(cause)).Inc()
	r.guard.noteStore(cause, cur)
	clear(r.rereads) // the relist's rows say again what is withheld
	changes, err := r.applyAll(ctx, all, parsed)
	if err != nil {
		restoreGC()
		r.relistCause = cause
		return nil, fmt.Errorf("relist (%s): %w", cause, err)
	}
	restoreGC() // before Synced: a synced process runs at its own setting
	r.cursor, r.polledAt = cur, polled
	r.setRevision(maxRevision(all))
	r.relistCause = ""
	r.markSynced()
	return changes, nil
}

// relistRows relists. From a store that streams its rows, the metadata
// rows are parsed into nodes (one per row, in order) while the rest are
// read.
func (r *Reconciler) relistRows(ctx context.Context) (snapshot.Rows, snapshot.Cursor, []*node, error) {
	s, ok := r.src.(snapshot.Streamer)
	if !ok {
		all, cur, err := r.src.Relist(ctx)
		return all, cur, nil, err
	}
	p := newParsing(r.opts.Limits)
	all, cur, err := s.RelistStream(ctx, p.batch)
	parsed := p.wait()
	return all, cur, parsed, err
}

// applyAll rebuilds the model from every row (parsed: the metadata rows'
// nodes if already built) and applies every entry whose signature
// changed, evicting what is no longer desired.
func (r *Reconciler) applyAll(ctx context.Context, all snapshot.Rows, parsed []*node) ([]Change, error) {
	prev := r.model
	m := r.buildModel(all, parsed)
	r.modelMu.Lock()
	r.model = m
	r.modelMu.Unlock()
	// Entries of the registries no row claims any more are evictions: the
	// guard may keep them (as ghosts in the model).
	var gone []evictionCand
	for _, k := range registry.Kinds {
		for _, key := range r.regs.Of(k).Keys() {
			if ref := (registry.Ref{Kind: k, Key: key}); r.model.nodes[ref] == nil {
				gone = append(gone, evictionCand{ref: ref, old: prev.nodes[ref]})
			}
		}
	}
	r.guardEvictions(ctx, gone)
	if err := r.loadOwners(ctx); err != nil {
		return nil, err
	}
	if _, err := r.settleOwners(ctx, nil); err != nil {
		return nil, err
	}
	// Every desired entry, and every entry of the registries besides.
	refs := make([]target, 0, len(r.model.nodes)+len(gone))
	for ref, n := range r.model.nodes {
		refs = append(refs, target{ref, n})
	}
	for _, c := range gone {
		if r.model.nodes[c.ref] == nil {
			refs = append(refs, target{ref: c.ref})
		}
	}
	return r.apply(ctx, refs, relisted(&all), nil), nil
}

func sameWants(a, b []want) bool {
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

func (row sourceRow) revision() int64 {
	switch {
	case row.meta != nil:
		return row.meta.Revision
	case row.secret != nil:
		return row.secret.Revision
	case row.cred != nil:
		return row.cred.Revision
	}
	return 0
}

// revisionAt is the row's watermark time (store clock).
func (row sourceRow) revisionAt() time.Time {
	switch {
	case row.meta != nil:
		return row.meta.UpdatedAt
	case row.secret != nil:
		return row.secret.UpdatedAt
	case row.cred != nil:
		return row.cred.UpdatedAt
	}
	return time.Time{}
}

// maxRevision is the highest revision among rows (deleted rows' read
// since included: Rows.Revision).
func maxRevision(rows snapshot.Rows) int64 {
	n := rows.Revision
	for i := range rows.Metadata {
		n = max(n, rows.Metadata[i].Revision)
	}
	for i := range rows.Secrets {
		n = max(n, rows.Secrets[i].Revision)
	}
	for i := range rows.Credentials {
		n = max(n, rows.Credentials[i].Revision)
	}
	return n
}

func (row sourceRow) body() []byte {
	if row.meta != nil {
		return row.meta.Metadata
	}
	return nil
}

// schemaChecker is a store that can say its schema (the journal's
// triggers among it) is what this binary needs.
type schemaChecker interface {
	CheckSchema(ctx context.Context) error
}

// checkSchema checks, every SchemaCheckInterval, that the store's schema
// is whole: a dropped journal trigger (its table's changes would never be
// seen again) reports the store down naming it, logged once per change,
// instead of changes silently missed. It returns the failure to report.
func (r *Reconciler) checkSchema(ctx context.Context) error {
	sc, ok := r.src.(schemaChecker)
	if !ok || r.opts.SchemaCheckInterval < 0 {
		return nil
	}
	if time.Since(r.lastSchemaCheck) < r.opts.SchemaCheckInterval {
		return r.schemaErr
	}
	r.lastSchemaCheck = time.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := sc.CheckSchema(cctx)
	if err != nil && (ctx.Err() != nil || !errors.Is(err, snapshot.ErrSchema)) {
		return r.schemaErr // unreachable or stopping: the poll reports that
	}
	switch {
	case err != nil && (r.schemaErr == nil || r.schemaErr.Error() != err.Error()):
		r.log.WarnContext(ctx, "store schema changed under the loop: changes may be missed", slog.String("error", err.Error()))
	case err == nil && r.schemaErr != nil:
		r.log.InfoContext(ctx, "store schema whole again")
	}
	r.schemaErr = err
	return err
}
