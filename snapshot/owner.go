package snapshot

import "context"

// CredentialOwners records which organization each connector credential
// ref serves (sys_reconciler_credential_owner): sys_connector_credential
// has no organization column, so the loop binds a ref to the organization
// of the first active row naming it ("" is the environment-wide scope) and
// every sidecar of the fleet reads the same binding.
type CredentialOwners interface {
	// CredentialOwners returns every recorded binding, ref → organization.
	CredentialOwners(ctx context.Context) (map[string]string, error)
	// BindCredential records org as ref's owner unless an owner is
	// recorded already, and returns the recorded owner (another sidecar
	// may have bound it first).
	BindCredential(ctx context.Context, ref, org string) (string, error)
	// UnbindCredential removes ref's binding if org still owns it.
	UnbindCredential(ctx context.Context, ref, org string) error
}
