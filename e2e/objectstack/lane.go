//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/hashspec"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
)

// BusPrefix is the platform's default Redis key prefix; lane channels are
// BusPrefix + "ps:" + name.
const BusPrefix = "os:"

// Lane channel names (after BusPrefix + "ps:").
const (
	LaneMetadataMutated   = "metadata.mutated"
	LaneMetadataChanged   = "metadata.changed"
	LaneDatasourceMutated = "datasource.mutated"
)

// PublishLane publishes a lane message on the stack's bus the way the
// platform's Redis driver does: PUBLISH os:ps:<lane> {"n":origin,"t":<ms>,"p":payload}.
// It returns how many subscribers received it (each node subscribes once).
func (s *Stack) PublishLane(lane, origin string, payload any) (int64, error) {
	msg, err := json.Marshal(map[string]any{"n": origin, "t": time.Now().UnixMilli(), "p": payload})
	if err != nil {
		return 0, err
	}
	return s.Redis.Publish(BusPrefix+"ps:"+lane, string(msg))
}

// MetadataMutated is the payload naming one sys_metadata item on
// metadata.mutated (state "active" or "deleted"; org nil for an env-wide
// item).
func MetadataMutated(origin, typ, name, state string, org *string) map[string]any {
	return map[string]any{"originNode": origin, "event": map[string]any{
		"type": typ, "name": name, "state": state, "organizationId": org,
	}}
}

// DatasourceMutated is the payload naming a datasource on datasource.mutated.
func DatasourceMutated(origin, name string) map[string]any {
	return map[string]any{"originNode": origin, "name": name}
}

// InsertMetadata writes an active, env-wide sys_metadata row with plain
// SQL (no platform code: no publish), with the platform's checksum, and
// returns its id.
func InsertMetadata(ctx context.Context, dbURL, typ, name, body string) (string, error) {
	sum, err := hashspec.Checksum([]byte(body))
	if err != nil {
		return "", fmt.Errorf("checksum of %s/%s: %w", typ, name, err)
	}
	id := "e2e" + randomHex(7)
	err = testdb.Exec(ctx, dbURL, `INSERT INTO sys_metadata (id, name, type, metadata, state, version, checksum)
		VALUES ($1, $2, $3, $4, 'active', 1, $5)`, id, name, typ, body, sum)
	if err != nil {
		return "", fmt.Errorf("insert sys_metadata %s/%s: %w", typ, name, err)
	}
	return id, nil
}

// UpdateMetadata replaces the body of env-wide row type/name with plain
// SQL, bumping its version and checksum as the platform does.
func UpdateMetadata(ctx context.Context, dbURL, typ, name, body string) error {
	sum, err := hashspec.Checksum([]byte(body))
	if err != nil {
		return fmt.Errorf("checksum of %s/%s: %w", typ, name, err)
	}
	err = testdb.Exec(ctx, dbURL, `UPDATE sys_metadata SET metadata = $3, checksum = $4, version = version + 1, updated_at = now()
		WHERE type = $1 AND name = $2 AND organization_id IS NULL`, typ, name, body, sum)
	if err != nil {
		return fmt.Errorf("update sys_metadata %s/%s: %w", typ, name, err)
	}
	return nil
}

// DeleteMetadata deletes env-wide row type/name with plain SQL.
func DeleteMetadata(ctx context.Context, dbURL, typ, name string) error {
	err := testdb.Exec(ctx, dbURL, `DELETE FROM sys_metadata WHERE type = $1 AND name = $2 AND organization_id IS NULL`, typ, name)
	if err != nil {
		return fmt.Errorf("delete sys_metadata %s/%s: %w", typ, name, err)
	}
	return nil
}

// SetDatasourceActive sets a runtime datasource row's body "active" with
// plain SQL (version bumped; the row's checksum stays NULL).
func SetDatasourceActive(ctx context.Context, dbURL, name string, active bool) error {
	err := testdb.Exec(ctx, dbURL, `UPDATE sys_metadata SET metadata = jsonb_set(metadata::jsonb, '{active}', to_jsonb($2::boolean))::text,
		version = version + 1, updated_at = now() WHERE type = 'datasource' AND name = $1`, name, active)
	if err != nil {
		return fmt.Errorf("set datasource %s active=%v: %w", name, active, err)
	}
	return nil
}
