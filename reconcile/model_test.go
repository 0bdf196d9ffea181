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

// putAll builds the model put builds one node at a time: where two rows
// claim one key (the newer revision wins, the later row on a tie), where
// none does (filled at once), and where keys differ but a symbol repeats
// (one name in two organizations).
func TestPutAllAsPut(t *testing.T) {
	t.Parallel()
	obj := func(id, org, key string, rev int64, wants ...string) *node {
		n := &node{ref: registry.Ref{Kind: registry.KindEngine, Key: org + key},
			addr: snapshot.Address{Table: snapshot.TableMetadata, Key: id}, rev: rev,
			sym: symOf(registry.KindEngine, "object", key)}
		for _, w := range wants {
			n.wants = append(n.wants, newWant(registry.KindEngine, "object", w))
		}
		return n
	}
	for name, ns := range map[string][]*node{
		"claimed twice": {
			obj("1", "", "a", 5, "b"), nil, obj("2", "", "b", 1),
			obj("3", "", "a", 4, "c"),      // older than row 1: loses
			obj("4", "", "b", 1, "a"),      // same revision as row 2: the later wins
			obj("5", "", "c", 2, "a", "b"), // plain
			obj("6", "", "c", 3),           // newer than row 5: wins, its wants go
		},
		"each key once":  {obj("1", "", "a", 1, "b"), obj("2", "", "b", 2, "a"), nil, obj("3", "", "c", 3, "a", "b")},
		"a symbol twice": {obj("1", "", "a", 1, "b"), obj("2", "o1:", "a", 2), obj("3", "", "b", 3, "a"), obj("4", "o2:", "a", 4, "b")},
	} {
		t.Run(name, func(t *testing.T) {
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
			samePut(t, one, all)
		})
	}
}

// samePut fails unless model got indexes what want does.
func samePut(t *testing.T, want, got *model) {
	t.Helper()
	if !maps.Equal(want.nodes, got.nodes) || !maps.Equal(want.byAddr, got.byAddr) {
		t.Fatalf("nodes or addresses differ:\n%v %v\n%v %v", want.nodes, want.byAddr, got.nodes, got.byAddr)
	}
	if len(want.bySym) != len(got.bySym) {
		t.Fatalf("symbols: %v, want %v", got.bySym, want.bySym)
	}
	refsOf := func(ns []*node) []registry.Ref {
		refs := make([]registry.Ref, len(ns))
		for i, n := range ns {
			refs[i] = n.ref
		}
		return slices.SortedFunc(slices.Values(refs), applyOrder)
	}
	for s, ns := range want.bySym {
		if g, w := refsOf(got.bySym[s]), refsOf(ns); !slices.Equal(g, w) {
			t.Fatalf("candidates of %q: %v, want %v", s, g, w)
		}
	}
	if len(want.dependents) != len(got.dependents) {
		t.Fatalf("referrers: %v, want %v", got.dependents, want.dependents)
	}
	for s, set := range want.dependents {
		if !maps.Equal(set, got.dependents[s]) {
			t.Fatalf("referrers of %q: %v, want %v", s, got.dependents[s], set)
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
		return signature(n, sourceRow{meta: r}, m)
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
