package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/drivers/engine"
	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

func validateCmd() *command {
	return &command{
		short: "Tell what applying proposed rows would do, read-only.",
		name:  "validate",
		usage: "FILE|- [--store.url URL] [--json]",
		summary: `Check proposed sys_metadata rows against the current store with the loop's
own rules, read-only: entries created, rebuilt (dependents included), held
(with reasons), evicted, the lane messages the sidecars would publish, the
entries that would turn stale on their replicas, and whether the eviction
guard would trip. Nothing is materialized (no upstream is probed, no pool
opened), nothing written.

FILE is a JSON array of rows in the platform's shape: {"type", "name",
"organization_id", "package_id", "state" (default active), "metadata" (an
object, or its JSON text), "checksum", "id"}; a row with "delete": true
deletes the row it matches (by id, else by type, name, organization and
package). "org" and "package" are accepted for the organization and
package. Exits 3 when something would be held or the guard would trip.`,
		flags: func(fs *pflag.FlagSet) {
			configFlag(fs)
			config.AddFlags(fs, config.KeyStoreURL, config.KeyCodeObjects, config.KeyMaxBodyBytes, config.KeyMaxRefs,
				config.KeyGuardMaxEvictions, config.KeyGuardWindow)
			jsonFlag(fs)
		},
		run: runValidate,
	}
}

// proposedRow is one row of a validate FILE.
type proposedRow struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Name           string          `json:"name"`
	OrganizationID *string         `json:"organization_id"`
	Org            *string         `json:"org"`
	PackageID      *string         `json:"package_id"`
	Package        *string         `json:"package"`
	State          string          `json:"state"`
	Metadata       json.RawMessage `json:"metadata"`
	Checksum       string          `json:"checksum"`
	Delete         bool            `json:"delete"`
}

// parseProposal reads a validate FILE.
func parseProposal(data []byte) ([]reconcile.Proposed, error) {
	var rows []proposedRow
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rows); err != nil {
		return nil, fmt.Errorf("want a JSON array of rows (type, name, organization_id, package_id, state, metadata, or delete: true): %w", err)
	}
	out := make([]reconcile.Proposed, 0, len(rows))
	for i, r := range rows {
		if r.ID == "" && (r.Type == "" || r.Name == "") {
			return nil, fmt.Errorf("row %d: type and name (or id) are required", i+1)
		}
		m := snapshot.MetadataRow{ID: r.ID, Type: r.Type, Name: r.Name, State: r.State, Checksum: r.Checksum}
		for _, o := range []*string{r.OrganizationID, r.Org} {
			if o != nil {
				m.OrganizationID = *o
			}
		}
		for _, p := range []*string{r.PackageID, r.Package} {
			if p != nil {
				m.PackageID = *p
			}
		}
		if !r.Delete {
			body := bytes.TrimSpace(r.Metadata)
			if len(body) > 0 && body[0] == '"' { // the metadata column's JSON text, as stored
				var s string
				if err := json.Unmarshal(body, &s); err != nil {
					return nil, fmt.Errorf("row %d: metadata: %w", i+1, err)
				}
				body = []byte(s)
			}
			if len(body) == 0 {
				return nil, fmt.Errorf("row %d (%s/%s): metadata is required (or delete: true)", i+1, r.Type, r.Name)
			}
			m.Metadata = body
		}
		out = append(out, reconcile.Proposed{Row: m, Delete: r.Delete})
	}
	return out, nil
}

// validateReport is the answer of `reconciler validate --json`.
type validateReport struct {
	reconcile.Validation
	// Lanes are the messages the sidecars would publish (each replica
	// that lacks the change gets them once).
	Lanes []laneMessage `json:"lanes"`
	// Stale are the entries that no lane updates on ObjectStack 17.4: after
	// the change their replicas hold the older copy until restarted.
	Stale []reconcile.ValidationItem `json:"stale"`
	// Verdict is "ok", or "attention" (something held, or a guard trip).
	Verdict string `json:"verdict"`
}

type laneMessage struct {
	Kind registry.Kind `json:"kind"`
	Key  string        `json:"key"`
	replica.Message
}

func runValidate(ctx context.Context, c *cli, fs *pflag.FlagSet) error {
	if len(c.args) != 1 {
		return usagef("want one FILE (or - for stdin)")
	}
	var data []byte
	var err error
	if c.args[0] == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, 256<<20))
	} else {
		data, err = os.ReadFile(c.args[0])
	}
	if err != nil {
		return fmt.Errorf("read proposal: %w", err)
	}
	proposal, err := parseProposal(data)
	if err != nil {
		return fmt.Errorf("%s: %w", c.args[0], err)
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		return err
	}
	store, err := snapshot.Open(cfg.StoreURL, snapshot.OpenOptions{MaxBodyBytes: int64(cfg.MaxBodyBytes)})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := store.CheckSchema(ctx); err != nil { // never migrates: validate writes nothing
		return fmt.Errorf("validate: %w", err)
	}
	lim, _ := config.ParseMaxEvictions(cfg.GuardMaxEvictions) // validated at load
	limits := metadata.Limits{MaxBodyBytes: int64(cfg.MaxBodyBytes), MaxRefs: cfg.MaxRefs}
	v, err := reconcile.Validate(ctx, store, reconcile.Options{
		ReplicaID:     "validate",
		CodeObjects:   cfg.CodeObjects,
		Limits:        limits,
		Materializers: map[registry.Kind]reconcile.Materializer{registry.KindEngine: engine.New(engine.Options{Limits: limits})},
		Guard:         reconcile.GuardOptions{Off: lim.Off, Max: lim.Count, Percent: lim.Percent, Window: cfg.GuardWindow},
	}, proposal)
	if err != nil {
		return err
	}
	rep := validateReport{Validation: v, Lanes: []laneMessage{}, Stale: []reconcile.ValidationItem{}, Verdict: "ok"}
	for _, ch := range v.Changes {
		for _, m := range replica.Messages(ch, "reconciler:REPLICA_ID") {
			rep.Lanes = append(rep.Lanes, laneMessage{Kind: ch.Kind, Key: ch.Key, Message: m})
		}
	}
	for _, list := range [][]reconcile.ValidationItem{v.Created, v.Rebuilt} {
		for _, it := range list {
			if it.State == registry.StateReady && replica.StaysStale(it.Kind, it.Key) && it.Action == reconcile.ActionRebuild {
				rep.Stale = append(rep.Stale, it)
			}
		}
	}
	attention := len(v.Held) > 0 || v.Trips()
	if attention {
		rep.Verdict = "attention"
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		if err := printJSON(c.stdout, rep); err != nil {
			return err
		}
	} else {
		printValidation(c, rep)
	}
	if attention {
		return errFound
	}
	return nil
}

func printValidation(c *cli, rep validateReport) {
	v := rep.Validation
	fmt.Fprintf(c.stdout, "%d proposed rows: %d created, %d rebuilt (%d dependents), %d evicted, %d held, %d lane messages, %d would turn stale\n",
		v.Proposed, len(v.Created), len(v.Rebuilt), dependents(v.Rebuilt), len(v.Evicted), len(v.Held), len(rep.Lanes), len(rep.Stale))
	if v.Trips() {
		fmt.Fprintf(c.stdout, "EVICTION GUARD WOULD TRIP: %d evictions held back, the entries would keep serving: %s\n", len(v.Guarded), clean(v.Guard.Reason))
	} else {
		fmt.Fprintf(c.stdout, "eviction guard: would not trip (guard.max_evictions %s within %s)\n", clean(v.Guard.Limit), clean(v.Guard.Window))
	}
	for _, u := range v.Unmatched {
		fmt.Fprintf(c.stdout, "deletion matches no row: %s\n", clean(u))
	}
	section := func(title string, items []reconcile.ValidationItem) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(c.stdout, "\n%s (%d):\n", title, len(items))
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  KIND\tKEY\tNOW\tTHEN\tREASON")
		for _, it := range items {
			then := string(it.State)
			if it.Action == reconcile.ActionEvict {
				then = "evicted"
			}
			if it.Dependent {
				then += " (dependent)"
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", clean(string(it.Kind)), clean(it.Key), dash(string(it.Before)), clean(then), dash(it.Reason))
		}
		_ = w.Flush()
	}
	notHeld := func(items []reconcile.ValidationItem) []reconcile.ValidationItem {
		var out []reconcile.ValidationItem
		for _, it := range items {
			if it.State != registry.StateHeld {
				out = append(out, it)
			}
		}
		return out
	}
	section("created", notHeld(v.Created))
	section("rebuilt", notHeld(v.Rebuilt))
	section("evicted", v.Evicted)
	section("held (created or rebuilt, and held)", v.Held)
	section("guarded (would keep serving)", v.Guarded)
	section("would turn stale on their replicas (restart the replica to load them)", rep.Stale)
	if len(rep.Lanes) > 0 {
		fmt.Fprintf(c.stdout, "\nlane messages (%d):\n", len(rep.Lanes))
		for _, l := range rep.Lanes {
			fmt.Fprintf(c.stdout, "  PUBLISH <prefix>ps:%s %s\n", l.Channel, clean(string(l.Payload)))
		}
	}
	fmt.Fprintf(c.stdout, "\nnothing was written or materialized; verdict: %s\n", strings.ToUpper(rep.Verdict))
}

func dependents(items []reconcile.ValidationItem) int {
	n := 0
	for _, it := range items {
		if it.Dependent {
			n++
		}
	}
	return n
}
