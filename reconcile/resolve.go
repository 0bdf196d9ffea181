package reconcile

import (
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/secret"
)

func (r *Reconciler) materializeCredential(st step) outcome {
	if st.node.hold != "" {
		return outcome{state: registry.StateHeld, reason: st.node.hold, result: "held", dropInstance: true}
	}
	return outcome{state: registry.StateReady, inst: NopInstance{}, result: "ready"}
}

// desired resolves the entry's references and builds its Desired. A body
// fault, a missing reference or an unusable credential holds the entry:
// the reason says which.
func (r *Reconciler) desired(st step) (Desired, string) {
	d := Desired{Kind: st.ref.Kind, Key: st.ref.Key, Revision: st.rev, Signature: st.sig,
		Body: st.row.body(), Metadata: st.row.meta}
	n := st.node
	if n.fault != "" {
		return d, n.fault
	}
	var missing []metadata.Reference
	for _, w := range n.wants {
		dep, ok := r.model.resolveNode(n, w)
		switch w.kind {
		case registry.KindCredential:
			ref, secret, hold := r.credential(n, n, w)
			if hold != "" {
				return d, hold
			}
			d.CredentialRef, d.Secret = ref, secret
		case registry.KindConnector:
			if !ok {
				missing = append(missing, w.reference())
				continue
			}
			lent := false
			for _, cw := range dep.wants {
				if cw.kind != registry.KindCredential {
					continue
				}
				ref, secret, hold := r.credential(n, dep, cw)
				if hold != "" {
					return d, hold
				}
				d.CredentialRef, d.Secret, lent = ref, secret, true
			}
			if !lent {
				return d, "connector " + w.name + " has no credential to lend"
			}
			d.Refs = append(d.Refs, dep.ref)
		default:
			if !ok {
				missing = append(missing, w.reference())
			} else if dep != nil { // nil: defined in code
				d.Refs = append(d.Refs, dep.ref)
			}
		}
	}
	if len(missing) > 0 {
		return d, metadata.DescribeMissing(missing)
	}
	return d, ""
}

// credential resolves a credential want of holder for user (holder
// itself, or a datasource borrowing holder's credential): its display
// name, value, or why it cannot be used. The trust rules (trust.go) come
// before the credential's own state, so a refused entry learns nothing of
// it.
func (r *Reconciler) credential(user, holder *node, w want) (string, secret.Secret, string) {
	name := credentialName(w.name)
	cn, ok := r.model.resolveNode(holder, w)
	if !ok {
		return name, secret.Secret{}, "credential " + name + " is missing"
	}
	if why := r.model.credentialUse(holder, w.name, cn); why != "" {
		return name, secret.Secret{}, why
	}
	if user != holder {
		if why := r.model.credentialUse(user, w.name, cn); why != "" {
			return name, secret.Secret{}, why
		}
	}
	if cn.hold != "" {
		return name, secret.Secret{}, cn.hold
	}
	return name, cn.secret, ""
}

// credentialName is a credential key as a body names it:
// "sys_secret:<id>" or the ref.
func credentialName(key string) string {
	p, err := registry.ParseKey(registry.KindCredential, key)
	if err != nil {
		return key
	}
	if p.Secret {
		return registry.SecretPrefix + p.Name
	}
	return p.Name
}
