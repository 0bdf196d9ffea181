package sqlite

import (
	"context"
	"database/sql"
)

// CredentialOwners implements CredentialOwners.
func (s *Store) CredentialOwners(ctx context.Context) (map[string]string, error) {
	type binding struct{ ref, org string }
	got, err := sqliteSelect(ctx, s.db, "SELECT ref, organization_id FROM sys_reconciler_credential_owner", nil,
		func(r *sql.Rows) (b binding, err error) { return b, r.Scan(&b.ref, &b.org) })
	if err != nil {
		return nil, s.interpretError("read credential owners", err)
	}
	out := make(map[string]string, len(got))
	for _, b := range got {
		out[b.ref] = b.org
	}
	return out, nil
}

// BindCredential implements CredentialOwners.
func (s *Store) BindCredential(ctx context.Context, ref, org string) (string, error) {
	var owner string
	err := s.writeTx(ctx, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, `INSERT INTO sys_reconciler_credential_owner (ref, organization_id) VALUES (?, ?)
ON CONFLICT (ref) DO NOTHING`, ref, org); err != nil {
			return err
		}
		return c.QueryRowContext(ctx, "SELECT organization_id FROM sys_reconciler_credential_owner WHERE ref = ?", ref).Scan(&owner)
	})
	if err != nil {
		return "", s.interpretError("bind credential", err)
	}
	return owner, nil
}

// UnbindCredential implements CredentialOwners.
func (s *Store) UnbindCredential(ctx context.Context, ref, org string) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM sys_reconciler_credential_owner WHERE ref = ? AND organization_id = ?", ref, org)
	return s.interpretError("unbind credential", err)
}
