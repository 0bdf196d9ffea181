package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// CredentialOwners implements CredentialOwners.
func (p *Store) CredentialOwners(ctx context.Context) (map[string]string, error) {
	rows, err := p.pool.Query(ctx, "SELECT ref, organization_id FROM sys_reconciler_credential_owner")
	if err != nil {
		return nil, p.interpretError("read credential owners", err)
	}
	out := make(map[string]string)
	var ref, org string
	_, err = pgx.ForEachRow(rows, []any{&ref, &org}, func() error { out[ref] = org; return nil })
	if err != nil {
		return nil, p.interpretError("read credential owners", err)
	}
	return out, nil
}

// BindCredential implements CredentialOwners.
func (p *Store) BindCredential(ctx context.Context, ref, org string) (string, error) {
	// Racing another sidecar's insert, the statement's snapshot may see
	// neither row: the second try sees the committed one.
	var owner string
	var err error
	for range 2 {
		if owner, err = p.bindOnce(ctx, ref, org); !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return "", p.interpretError("bind credential", err)
	}
	return owner, nil
}

func (p *Store) bindOnce(ctx context.Context, ref, org string) (string, error) {
	var owner string
	err := p.pool.QueryRow(ctx, `WITH ins AS (
  INSERT INTO sys_reconciler_credential_owner (ref, organization_id) VALUES ($1, $2)
  ON CONFLICT (ref) DO NOTHING RETURNING organization_id)
SELECT organization_id FROM ins
UNION ALL SELECT organization_id FROM sys_reconciler_credential_owner WHERE ref = $1
LIMIT 1`, ref, org).Scan(&owner)
	return owner, err
}

// UnbindCredential implements CredentialOwners.
func (p *Store) UnbindCredential(ctx context.Context, ref, org string) error {
	_, err := p.pool.Exec(ctx, "DELETE FROM sys_reconciler_credential_owner WHERE ref = $1 AND organization_id = $2", ref, org)
	return p.interpretError("unbind credential", err)
}

// Encrypted reports whether the store's connection uses TLS, and whether
// the server is on this host (a Unix socket or a loopback address), where
// plaintext crosses no network.
func (p *Store) Encrypted(ctx context.Context) (enc, local bool, err error) {
	err = p.pool.QueryRow(ctx, `SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false),
  coalesce(inet_client_addr() IS NULL OR host(inet_client_addr()) IN ('127.0.0.1', '::1'), true)`).Scan(&enc, &local)
	return enc, local, p.interpretError("check encryption", err)
}
