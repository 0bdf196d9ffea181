//go:build objectstack

package objectstack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/objectstack-fleet/reconciler/internal/ossecret"
)

// MetadataRow is a sys_metadata row as the platform stores it.
type MetadataRow struct {
	ID             string
	Type           string
	Name           string
	Metadata       string
	State          *string
	OrganizationID *string
	PackageID      *string
	Version        *float64
	Checksum       *string
}

// SecretRow is a sys_secret row as the platform stores it.
type SecretRow struct {
	ID             string
	Namespace      string
	Key            string
	KMSKeyID       string
	Alg            string
	Version        float64
	Ciphertext     string
	OrganizationID *string
}

// ErrNoRow is returned when the row looked for does not exist.
var ErrNoRow = errors.New("no such row")

// MetadataRows reads the active or inactive sys_metadata rows of type and
// name (several may share them: organization and package tell them apart).
func MetadataRows(ctx context.Context, dbURL, typ, name string) ([]MetadataRow, error) {
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT id, type, name, metadata, state, organization_id, package_id, version, checksum
		FROM sys_metadata WHERE type = $1 AND name = $2 ORDER BY id`, typ, name)
	if err != nil {
		return nil, fmt.Errorf("read sys_metadata %s/%s: %w", typ, name, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MetadataRow, error) {
		var m MetadataRow
		err := r.Scan(&m.ID, &m.Type, &m.Name, &m.Metadata, &m.State, &m.OrganizationID, &m.PackageID, &m.Version, &m.Checksum)
		return m, err
	})
}

// MetadataRowOf reads the only sys_metadata row of type and name.
func MetadataRowOf(ctx context.Context, dbURL, typ, name string) (MetadataRow, error) {
	rows, err := MetadataRows(ctx, dbURL, typ, name)
	if err != nil {
		return MetadataRow{}, err
	}
	switch len(rows) {
	case 0:
		return MetadataRow{}, fmt.Errorf("sys_metadata %s/%s: %w", typ, name, ErrNoRow)
	case 1:
		return rows[0], nil
	}
	return MetadataRow{}, fmt.Errorf("sys_metadata %s/%s: %d rows", typ, name, len(rows))
}

// SecretRowOf reads the sys_secret row id.
func SecretRowOf(ctx context.Context, dbURL, id string) (SecretRow, error) {
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return SecretRow{}, err
	}
	defer conn.Close(context.Background())
	var s SecretRow
	err = conn.QueryRow(ctx, `SELECT id, namespace, key, kms_key_id, alg, version, ciphertext, organization_id
		FROM sys_secret WHERE id = $1`, id).Scan(&s.ID, &s.Namespace, &s.Key, &s.KMSKeyID, &s.Alg, &s.Version, &s.Ciphertext, &s.OrganizationID)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("sys_secret %s: %w", id, ErrNoRow)
	}
	if err != nil {
		return s, fmt.Errorf("read sys_secret %s: %w", id, err)
	}
	return s, nil
}

// Sealed returns the row as ossecret opens it.
func (s SecretRow) Sealed() ossecret.Sealed {
	return ossecret.Sealed{ID: s.ID, Namespace: s.Namespace, Key: s.Key, KMSKeyID: s.KMSKeyID, Alg: s.Alg, Ciphertext: s.Ciphertext}
}

func connect(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect to the node's database: %w", err)
	}
	return conn, nil
}
