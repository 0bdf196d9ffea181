package reconcile

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Drift compares the store's current rows with the registries.
// It reads the store in one consistent snapshot and does not disturb the
// loop. Safe to call from any goroutine.
func (r *Reconciler) Drift(ctx context.Context) (DriftReport, error) {
	all, _, err := r.src.Relist(ctx)
	if err != nil {
		return DriftReport{}, fmt.Errorf("drift: relist: %w", err)
	}
	st := r.Status()
	rep := DriftReport{ReplicaID: r.opts.ReplicaID, At: time.Now().UTC(), Cursor: st.Cursor.String(), LagSeconds: st.LagSeconds,
		NotReady: []DriftItem{}, SignatureMismatch: []DriftItem{}, Orphans: []DriftItem{}, Missing: []DriftItem{}, ChecksumMismatches: []DriftItem{}, Guarded: []DriftItem{}}
	rows := make(rowSet, all.Len())
	rows.add(all)
	m := r.buildModel(all, nil)
	m.owners = r.ownersSnapshot()
	for ref, n := range m.nodes {
		rep.Summary.Desired++
		sig := signature(n, rows[n.addr], m)
		e, ok := r.regs.Of(ref.Kind).Get(ref.Key)
		if !ok {
			rep.Missing = append(rep.Missing, DriftItem{Kind: ref.Kind, Key: ref.Key, Revision: n.rev})
			continue
		}
		if e.Signature != sig && !n.deferred { // a withheld body has no digest to compare (memory.go)
			rep.SignatureMismatch = append(rep.SignatureMismatch, driftItem(e, n.rev))
		}
	}
	for _, k := range registry.Kinds {
		for _, e := range r.regs.Of(k).List(nil) {
			ref := registry.Ref{Kind: e.Kind, Key: e.Key}
			if _, ok := m.nodes[ref]; !ok {
				if e.Guarded {
					rep.Guarded = append(rep.Guarded, driftItem(e, e.Revision))
				} else {
					rep.Orphans = append(rep.Orphans, driftItem(e, 0))
				}
				continue
			}
			if e.State == registry.StateReady {
				rep.Summary.Ready++
			} else {
				rep.NotReady = append(rep.NotReady, driftItem(e, e.Revision))
			}
		}
	}
	for i := range all.Metadata {
		row := &all.Metadata[i]
		if row.State != "active" || row.Checksum == "" || row.Withheld != 0 {
			continue
		}
		if metadata.VerifyChecksum(row.Metadata, row.Checksum) != nil {
			n := metadataNode(row, r.opts.Limits)
			if n == nil {
				continue
			}
			item := DriftItem{Kind: n.ref.Kind, Key: n.ref.Key, Revision: row.Revision, Reason: "checksum mismatch"}
			if e, ok := r.regs.Of(n.ref.Kind).Get(n.ref.Key); ok {
				item.State, item.ServingRevision = e.State, e.ServingRevision
			}
			rep.ChecksumMismatches = append(rep.ChecksumMismatches, item)
		}
	}
	if stall, err := r.src.Stall(ctx, st.Cursor, r.opts.StallAge); err == nil {
		rep.Stall = stall
	}
	for _, s := range [][]DriftItem{rep.NotReady, rep.SignatureMismatch, rep.Orphans, rep.Missing, rep.ChecksumMismatches, rep.Guarded} {
		sortItems(s)
	}
	rep.Summary.NotReady = len(rep.NotReady)
	rep.Summary.SignatureMismatch = len(rep.SignatureMismatch)
	rep.Summary.Orphans = len(rep.Orphans)
	rep.Summary.Missing = len(rep.Missing)
	rep.Summary.ChecksumMismatches = len(rep.ChecksumMismatches)
	rep.Summary.Guarded = max(len(rep.Guarded), st.Guard.Held)
	r.metrics.DriftItems.WithLabelValues("not_ready").Set(float64(rep.Summary.NotReady))
	r.metrics.DriftItems.WithLabelValues("signature_mismatch").Set(float64(rep.Summary.SignatureMismatch))
	r.metrics.DriftItems.WithLabelValues("orphans").Set(float64(rep.Summary.Orphans))
	r.metrics.DriftItems.WithLabelValues("missing").Set(float64(rep.Summary.Missing))
	r.metrics.DriftItems.WithLabelValues("checksum_mismatches").Set(float64(rep.Summary.ChecksumMismatches))
	r.metrics.DriftItems.WithLabelValues("guarded").Set(float64(rep.Summary.Guarded))
	if r.opts.ReplicaDrift != nil {
		rep.ReplicaSync = r.opts.ReplicaDrift()
	}
	return rep, nil
}

func driftItem(e registry.Entry, rev int64) DriftItem {
	return DriftItem{Kind: e.Kind, Key: e.Key, State: e.State, Reason: e.Reason, Since: e.Since,
		Revision: rev, ServingRevision: e.ServingRevision}
}

func sortItems(s []DriftItem) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Kind != s[j].Kind {
			return kindOrder(s[i].Kind) < kindOrder(s[j].Kind)
		}
		return s[i].Key < s[j].Key
	})
}
