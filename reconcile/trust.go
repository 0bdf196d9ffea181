package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// This file is the loop's one place for the rules of who may use a
// credential (the drift report, explain and validate see the same
// verdicts, through desired and signature):
//
//   - A sys_secret serves only the datasource it was written for: same
//     organization (NULL and '' are both the environment-wide scope),
//     namespace "datasource", the datasource's name as the secret's key —
//     as the platform writes them.
//   - A sys_connector_credential ref (the table has no organization
//     column) is bound to the organization of the first active row naming
//     it, '' for an environment-wide row. The binding is recorded in the
//     store (CredentialOwners) and kept while an active row of that
//     organization names the ref, so an owner editing its row never hands
//     it over. Rows of the owner's organization and environment-wide rows
//     (the platform administrators' scope) may use it; any other row is
//     held, naming the rule.
//   - A datasource borrowing a connector's credential (external.connector)
//     must be allowed that credential itself, as the connector must.
//
// Reasons name the rule and the credential, never a value nor the other
// organization.

// CredentialOwners records the organization each connector credential ref
// is bound to (a snapshot.Store is one). Safe for concurrent use.
type CredentialOwners interface {
	CredentialOwners(ctx context.Context) (map[string]string, error)
	BindCredential(ctx context.Context, ref, org string) (string, error)
	UnbindCredential(ctx context.Context, ref, org string) error
}

// ownerNone is an owner's place in signatures when a ref has no binding
// (no row names it, or a view built without the loop's bindings).
const ownerNone = "\x00none"

// isSecretKey reports whether a credential key names a sys_secret row.
func isSecretKey(key string) bool { return strings.HasPrefix(key, registry.SecretPrefix) }

// nodeName is the row name of a connector or datasource node (its symbol's
// last part).
func nodeName(n *node) string { return n.sym[strings.LastIndexByte(n.sym, 0)+1:] }

// credentialUse returns why user (an entry of the model) may not use the
// credential cn, named by key, or "" when it may.
func (m *model) credentialUse(user *node, key string, cn *node) string {
	name := credentialName(key)
	if isSecretKey(key) {
		s := cn.scope
		if user.ref.Kind != registry.KindDatasource || s == nil || s.namespace != "datasource" ||
			s.key != nodeName(user) || s.org != user.org {
			return "credential " + name + " does not serve this entry: a sys_secret serves only the datasource of its organization whose name is its key (namespace datasource)"
		}
		return ""
	}
	if user.org == "" {
		return "" // the environment-wide scope may use any ref
	}
	owner, ok := m.owners[key]
	if !ok {
		owner = m.firstNamer(key)
	}
	if owner != user.org {
		return "credential " + name + " is bound to another organization: a connector credential serves the organization of the first row naming it"
	}
	return ""
}

// ownerOf is what a signature records of a credential's binding.
func (m *model) ownerOf(key string) string {
	if isSecretKey(key) {
		return ""
	}
	if o, ok := m.owners[key]; ok {
		return o
	}
	return ownerNone
}

// firstNamer is the organization of the first active row naming the
// credential key: the lowest revision, the environment-wide scope first,
// then the lowest organization; ownerNone when no row names it.
func (m *model) firstNamer(key string) string {
	var first *node
	for ref := range m.dependents[symOf(registry.KindCredential, "", key)] {
		n := m.nodes[ref]
		if n == nil {
			continue
		}
		if first == nil || n.rev < first.rev || (n.rev == first.rev && cmp.Less(n.org, first.org)) {
			first = n
		}
	}
	if first == nil {
		return ownerNone
	}
	return first.org
}

// namedBy reports whether an active row of org names the credential key.
func (m *model) namedBy(key, org string) bool {
	for ref := range m.dependents[symOf(registry.KindCredential, "", key)] {
		if n := m.nodes[ref]; n != nil && n.org == org {
			return true
		}
	}
	return false
}

// credentialKeys lists the connector credential keys the model's rows
// name or that have a binding.
func (m *model) credentialKeys() map[string]bool {
	keys := make(map[string]bool, len(m.owners))
	for k := range m.owners {
		keys[k] = true
	}
	prefix := symOf(registry.KindCredential, "", "")
	for s := range m.dependents {
		if key, ok := strings.CutPrefix(s, prefix); ok && !isSecretKey(key) {
			keys[key] = true
		}
	}
	return keys
}

// ownerChange is one binding to record: from the old owner (had) to the
// new one (has).
type ownerChange struct {
	key      string
	old, new string
	had, has bool
}

// planOwners says which bindings of keys must change: a binding is kept
// while an active row of its organization names the ref; one that no row
// names goes; an unbound ref (or one whose owner's rows are gone) goes to
// the first row naming it.
func (m *model) planOwners(keys map[string]bool) []ownerChange {
	var out []ownerChange
	for key := range keys {
		old, had := m.owners[key]
		if had && m.namedBy(key, old) {
			continue
		}
		first := m.firstNamer(key)
		c := ownerChange{key: key, old: old, had: had, new: first, has: first != ownerNone}
		if c.had || c.has {
			out = append(out, c)
		}
	}
	return out
}

// settleOwners records the bindings keys need (all of the model's when
// keys is nil) and returns the keys whose owner changed. Without a store
// that records owners, bindings live in the model only.
func (r *Reconciler) settleOwners(ctx context.Context, keys map[string]bool) ([]string, error) {
	m := r.model
	if keys == nil {
		keys = m.credentialKeys()
	}
	plan := m.planOwners(keys)
	if len(plan) == 0 {
		return nil, nil
	}
	owners := maps.Clone(m.owners)
	if owners == nil {
		owners = make(map[string]string, len(plan))
	}
	changed := make([]string, 0, len(plan))
	for _, c := range plan {
		ref := credentialName(c.key)
		if c.had {
			if r.owners != nil {
				if err := r.owners.UnbindCredential(ctx, ref, c.old); err != nil {
					return nil, fmt.Errorf("release credential %s: %w", ref, err)
				}
			}
			delete(owners, c.key)
		}
		if c.has {
			got := c.new
			if r.owners != nil {
				var err error
				if got, err = r.owners.BindCredential(ctx, ref, c.new); err != nil {
					return nil, fmt.Errorf("bind credential %s: %w", ref, err)
				}
			}
			owners[c.key] = got
		}
		if o, ok := owners[c.key]; ok != c.had || o != c.old {
			changed = append(changed, c.key)
		}
	}
	r.modelMu.Lock() // Explain reads the model on other goroutines
	m.owners = owners
	r.modelMu.Unlock()
	r.mu.Lock()
	r.ownersView = owners // replaced, never changed: readers share it
	r.mu.Unlock()
	return changed, nil
}

// loadOwners reads the recorded bindings into the model (a relist: the
// store is the truth, another sidecar may have bound a ref meanwhile).
func (r *Reconciler) loadOwners(ctx context.Context) error {
	if r.owners == nil {
		snap := r.ownersSnapshot()
		r.modelMu.Lock()
		r.model.owners = snap
		r.modelMu.Unlock()
		return nil
	}
	got, err := r.owners.CredentialOwners(ctx)
	if err != nil {
		return fmt.Errorf("read credential owners: %w", err)
	}
	owners := make(map[string]string, len(got))
	for ref, org := range got {
		owners[registry.CredentialKey(ref)] = org
	}
	r.modelMu.Lock()
	r.model.owners = owners
	r.modelMu.Unlock()
	r.mu.Lock()
	r.ownersView = owners
	r.mu.Unlock()
	return nil
}

// ownersSnapshot is the loop's current bindings, for views built beside
// it (drift): shared, never changed.
func (r *Reconciler) ownersSnapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ownersView
}

// secretScope is what the trust rules need of a sys_secret row.
type secretScope struct {
	org, namespace, key string
}

func scopeOf(row *snapshot.SecretRow) *secretScope {
	return &secretScope{org: row.OrganizationID, namespace: row.Namespace, key: row.Key}
}
