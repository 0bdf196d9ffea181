package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// RepairStore is what the schema repair needs of the store: the fleet's
// lease, and the object's rows (to send the body exactly as stored, and
// to check that the save left every row as it was).
type RepairStore interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (snapshot.Lease, error)
	ReleaseLease(ctx context.Context, l snapshot.Lease) error
	MetadataNamed(ctx context.Context, typ, name string) ([]snapshot.MetadataRow, error)
}

// Bounds of a repair.
const (
	// repairLeaseTTL bounds how long a sidecar holds the fleet's repair
	// lease: a save (repairTimeout) and two reads of the rows. A sidecar
	// that dies holding it frees it at this age.
	repairLeaseTTL = 2 * time.Minute
	// repairTimeout bounds the save request.
	repairTimeout = 30 * time.Second
	// repairMarkTTL is how long a body repaired by one sidecar is not
	// repaired again by another (a lease per object and body checksum,
	// never released): once per unservable body for the fleet.
	repairMarkTTL = 24 * time.Hour
	// maxRepairAnswer caps what is read of the save's answer.
	maxRepairAnswer = 64 << 10
)

// repair has the platform sync the storage of unservable object name (key
// its entry's key): it saves the object's env-wide row through the
// platform's own route, PUT /api/v1/meta/object/<name>, with the body
// exactly as stored. ObjectStack 17.4's save path finds the stored
// checksum equal to its hashSpec of that body, writes no row ("skipped":
// no version, no history, no message) and still runs
// syncObjectSchema(name), which creates the missing table or columns. A
// row whose checksum is NULL or stale would be rewritten (the platform
// answers 409 without a parentVersion), so it is not tried: the note says
// how to fix the checksum. Once per body for the fleet, one sidecar at a
// time; it returns the note for the entry's error and whether to look
// again soon.
func (d *Driver) repair(ctx context.Context, key, name string) (note string, again bool) {
	rs := d.opts.Repair
	rows, err := rs.MetadataNamed(ctx, "object", name)
	if err != nil {
		return "repair: " + err.Error(), false
	}
	target, ok := envWideRow(rows)
	if !ok {
		return "repair not tried: object " + name + " has no env-wide active row (the platform refuses org-scoped object saves)", false
	}
	if target.Withheld > 0 {
		return fmt.Sprintf("repair not tried: the row's body (%d bytes) is above engine.max_body_bytes", target.Withheld), false
	}
	sum, err := metadata.Checksum(target.Metadata)
	if err != nil || target.Checksum != sum {
		stored := target.Checksum
		if stored == "" {
			stored = "NULL"
		}
		return fmt.Sprintf("repair not tried: the platform saves a body unchanged only when the row's checksum is its hashSpec "+
			"(row %s has %s): set it first (`reconciler checksum --row %s`)", target.ID, stored, target.ID), false
	}
	d.mu.Lock()
	done := d.repaired[key] == sum
	d.mu.Unlock()
	if done {
		return "repair of this body already tried once (see the log); save the object through the platform to retry", false
	}

	lease, err := rs.AcquireLease(ctx, snapshot.LeaseRepair, d.opts.Origin, repairLeaseTTL)
	var held *snapshot.LeaseHeldError
	if errors.As(err, &held) {
		return "repair waits: " + held.Error(), false
	}
	if err != nil {
		return "repair: " + err.Error(), false
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = rs.ReleaseLease(rctx, lease)
	}()
	mark := "repair:" + key + "@" + sum
	if _, err := rs.AcquireLease(ctx, mark, d.opts.Origin, repairMarkTTL); err != nil {
		if errors.As(err, &held) {
			d.mu.Lock()
			d.repaired[key] = sum
			d.mu.Unlock()
			return fmt.Sprintf("repaired by %s at %s", held.Lease.Holder, held.Lease.AcquiredAt.UTC().Format(time.RFC3339)), true
		}
		return "repair: " + err.Error(), false
	}
	d.mu.Lock()
	d.repaired[key] = sum
	d.mu.Unlock()

	start := time.Now()
	saveErr := d.saveObject(ctx, name, target.Metadata)
	after, readErr := rs.MetadataNamed(ctx, "object", name)
	result, what := "ok", ""
	switch {
	case readErr != nil:
		result, what = "error", "repair: rows not read back: "+readErr.Error()
	case !sameRows(rows, after):
		result, what = "changed", fmt.Sprintf("repair changed the rows of object %s (%d rows before, %d after): the save was to leave them as they were", name, len(rows), len(after))
	case saveErr != nil:
		result, what = "refused", "repair refused: "+saveErr.Error()
	}
	if m := d.opts.Metrics; m != nil {
		m.repairs.WithLabelValues(result).Inc()
	}
	attrs := []any{slog.String("key", key), slog.String("object", name), slog.String("row", target.ID),
		slog.Duration("took", time.Since(start).Round(time.Millisecond))}
	switch result {
	case "ok":
		d.log.InfoContext(ctx, "replica repair: the platform synced the object's storage (its row left as it was)", attrs...)
		return "repaired: the platform synced its storage; checking again", true
	case "changed":
		d.log.ErrorContext(ctx, what, attrs...)
	default:
		d.log.WarnContext(ctx, what, attrs...)
	}
	return what, false
}

// envWideRow returns the active row of an object without organization
// (the one every node registers): the one without a package, else the
// lowest package id, as references resolve.
func envWideRow(rows []snapshot.MetadataRow) (snapshot.MetadataRow, bool) {
	var out []snapshot.MetadataRow
	for _, r := range rows {
		if r.OrganizationID == "" && r.State == "active" {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return snapshot.MetadataRow{}, false
	}
	slices.SortFunc(out, func(a, b snapshot.MetadataRow) int {
		if (a.PackageID == "") != (b.PackageID == "") {
			if a.PackageID == "" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.PackageID, b.PackageID)
	})
	return out[0], true
}

// sameRows reports whether two reads of an object's rows are the same
// rows with the same body, checksum and version.
func sameRows(a, b []snapshot.MetadataRow) bool {
	return slices.EqualFunc(a, b, func(x, y snapshot.MetadataRow) bool {
		return x.ID == y.ID && bytes.Equal(x.Metadata, y.Metadata) && x.Checksum == y.Checksum && x.Version == y.Version &&
			x.State == y.State && x.OrganizationID == y.OrganizationID && x.PackageID == y.PackageID
	})
}

// saveObject sends body to the platform's save route of object name.
func (d *Driver) saveObject(ctx context.Context, name string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, repairTimeout)
	defer cancel()
	path := "/api/v1/meta/object/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, d.probe.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if d.probe.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.probe.token)
	}
	resp, err := d.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("PUT %s: %s", path, d.probe.scrub(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxRepairAnswer))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal(answer, &e)
	msg := e.Error
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return fmt.Errorf("PUT %s answered %d %s: %s", path, resp.StatusCode, e.Code, redactText(msg, d.probe.token))
}

// redactText keeps secret out of a text quoted from an answer.
func redactText(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "<redacted>")
}
