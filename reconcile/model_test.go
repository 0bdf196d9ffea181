package reconcile

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// putAll builds the model put builds one node at a time, also where two
// rows claim one key (the newer revision wins, the later row on a tie).
func TestPutAllAsPut(t *testing.T) {
	t.Parallel()
	obj := func(id, key string, rev int64, wants ...string) *node {
		n := &node{ref: registry.Ref{Kind: registry.KindEngine, Key: key},
			addr: snapshot.Address{Table: snapshot.TableMetadata, Key: id}, rev: rev,
			sym: symOf(registry.KindEngine, "object", key)}
		for _, w := range wants {
			n.wants = append(n.wants, newWant(registry.KindEngine, "object", w))
		}
		return n
	}
	ns := []*node{
		obj("1", "a", 5, "b"), nil, obj("2", "b", 1),
		obj("3", "a", 4, "c"),      // older than row 1: loses
		obj("4", "b", 1, "a"),      // same revision as row 2: the later wins
		obj("5", "c", 2, "a", "b"), // plain
		obj("6", "c", 3),           // newer than row 5: wins, its wants go
	}
	one := newModel(nil, 0)
	for _, n := range ns {
		if n == nil {
			continue
		}
		if old, ok := one.nodes[n.ref]; ok && old.rev > n.rev {
			continue
		}
		one.put(n)
	}
	all := newModel(nil, 0)
	all.putAll(slices.Clone(ns))
	if !maps.Equal(one.nodes, all.nodes) || !maps.Equal(one.byAddr, all.byAddr) {
		t.Fatalf("nodes or addresses differ:\n%v %v\n%v %v", one.nodes, one.byAddr, all.nodes, all.byAddr)
	}
	if len(one.bySym) != len(all.bySym) {
		t.Fatalf("symbols: %v, want %v", all.bySym, one.bySym)
	}
	for s, refs := range one.bySym {
		if got := all.bySym[s]; !slices.Equal(slices.SortedFunc(slices.Values(got), applyOrder), slices.SortedFunc(slices.Values(refs), applyOrder)) {
			t.Fatalf("candidates of %q: %v, want %v", s, got, refs)
		}
	}
	if len(one.dependents) != len(all.dependents) {
		t.Fatalf("referrers: %v, want %v", all.dependents, one.dependents)
	}
	for s, set := range one.dependents {
		if !maps.Equal(set, all.dependents[s]) {
			t.Fatalf("referrers of %q: %v, want %v", s, all.dependents[s], set)
		}
	}
}

// A signature hashes the body of the row it is given: the node's digest
// when the row is the node's own revision, the row's body when it is a
// newer row re-read for a dependent. A body differing only in layout and
// key order signs the same; one that is not JSON signs by its bytes.
func TestSignatureBody(t *testing.T) {
	t.Parallel()
	row := func(rev int64, body string) *snapshot.MetadataRow {
		return &snapshot.MetadataRow{ID: "o1", Type: "object", Name: "a", State: "active", Revision: rev, Metadata: []byte(body)}
	}
	sign := func(n *node, r *snapshot.MetadataRow) string {
		m := newModel(nil, 1)
		m.put(n)
		return signature(n, rowOf{meta: r}, m)
	}
	v1, v2 := row(1, `{"label":"A","fields":{}}`), row(2, `{"label":"B","fields":{}}`)
	n1, n2 := metadataNode(v1, metadata.Limits{}), metadataNode(v2, metadata.Limits{})
	if sign(n1, v1) == sign(n1, v2) {
		t.Fatal("a newer row's body does not change the signature")
	}
	if sign(n1, v2) != sign(n2, v2) {
		t.Fatal("a newer row signs differently through an older node than through its own")
	}
	same := row(3, "{ \"fields\" : {},\n \"label\": \"A\" }")
	if sign(metadataNode(same, metadata.Limits{}), same) != sign(n1, v1) {
		t.Fatal("the same body in another layout signs differently")
	}
	bad, fixed := row(4, `{"label":`), row(5, `{"label":"A","fields":{}}`)
	nb := metadataNode(bad, metadata.Limits{})
	if nb.fault == "" || sign(nb, bad) == sign(metadataNode(fixed, metadata.Limits{}), fixed) {
		t.Fatalf("a body that is not JSON: fault %q, signs as its fix", nb.fault)
	}
	if !strings.Contains(nb.fault, "not valid JSON") {
		t.Fatalf("fault %q does not say the body is not JSON", nb.fault)
	}
}
