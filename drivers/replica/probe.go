package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/redact"
)

// verdict is what a probe saw of one entry on the replica.
type verdict int

const (
	// inSync: the replica serves what the row says.
	inSync verdict = iota
	// lacks: the replica does not serve the change yet; a lane can fix it.
	lacks
	// stale: the replica holds an older copy that no lane updates.
	stale
	// unobservable: the replica does not show this entry's state.
	unobservable
	// unservable: the replica registered the object but cannot serve it:
	// its table or a field's column is missing.
	unservable
	// unseen: the replica serves the object but does not see its row (the
	// layers route answers no overlay). A message would make it re-read
	// no row and unregister the object, so none is sent: the row's
	// eviction, guarded or not, is the loop's to tell.
	unseen
)

func (v verdict) String() string {
	switch v {
	case inSync:
		return "in-sync"
	case lacks:
		return "lacking"
	case stale:
		return "stale"
	case unservable:
		return "unservable"
	case unseen:
		return "unseen"
	}
	return "unobservable"
}

// probeTimeout bounds one probe request.
const probeTimeout = 5 * time.Second

// maxProbeBody caps what is read of a probe answer.
const maxProbeBody = 4 << 20

// prober reads the replica's state through its HTTP API. It only sends GET
// requests: probing never writes.
type prober struct {
	base    string // base URL without a trailing slash
	token   string // bearer token; never printed
	client  *http.Client
	limit   *limiter // spaces every request (nil: none)
	catalog Catalog  // the nodes' database, for tables and columns (nil: none)
}

// errUnreachable marks a probe that did not get an answer (the replica is
// down or restarting): nudges wait for it.
var errUnreachable = errors.New("replica unreachable")

// errRefused marks a probe the replica answered 401 or 403: the token is
// missing, wrong or lacks a right.
var errRefused = errors.New("replica refused the credential")

// get fetches path (already escaped) once the limiter lets it, and returns
// the status and body. A transport failure wraps errUnreachable; 401/403
// is an error naming the refusal (the token is never part of it).
func (p *prober) get(ctx context.Context, path string) (int, []byte, error) {
	if p.limit != nil {
		if err := p.limit.wait(ctx); err != nil {
			return 0, nil, err
		}
	}
	return p.fetch(ctx, path)
}

// fetch is get without the limiter.
func (p *prober) fetch(ctx context.Context, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("probe %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return 0, nil, ctx.Err()
		}
		return 0, nil, fmt.Errorf("probe %s: %w: %v", path, errUnreachable, p.scrub(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return 0, nil, fmt.Errorf("probe %s: %w: read answer: %v", path, errUnreachable, p.scrub(err))
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return resp.StatusCode, body, fmt.Errorf("probe %s: %w: %d (replica.token_env)", path, errRefused, resp.StatusCode)
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return resp.StatusCode, body, fmt.Errorf("probe %s: %w: %d", path, errUnreachable, resp.StatusCode)
	}
	return resp.StatusCode, body, nil
}

// scrub keeps the token, and any secret of the replica's URL, out of an
// error's text.
func (p *prober) scrub(err error) string {
	return redact.Secrets(err.Error(), append(redact.URLSecrets(p.base), p.token)...)
}

// health reads the replica's uptime (seconds) and platform version ("" if
// it says none) from its anonymous health endpoint.
func (p *prober) health(ctx context.Context) (float64, string, error) {
	// Not behind the probes' limiter: a restart shows as the uptime going
	// down between two reads, so the reads keep their pace (one per
	// HealthInterval) while probes queue; a read delayed by about the
	// replica's uptime missed its restart.
	code, body, err := p.fetch(ctx, "/api/v1/health")
	if err != nil {
		return 0, "", err
	}
	if code != http.StatusOK {
		return 0, "", fmt.Errorf("health: %w: %d", errUnreachable, code)
	}
	type answer struct {
		Uptime  *float64 `json:"uptime"`
		Version string   `json:"version"`
	}
	var h struct {
		answer
		Data *answer `json:"data"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return 0, "", fmt.Errorf("health: unreadable answer: %w", err)
	}
	switch {
	case h.Uptime != nil:
		return *h.Uptime, h.Version, nil
	case h.Data != nil && h.Data.Uptime != nil:
		return *h.Data.Uptime, h.Data.Version, nil
	}
	return 0, "", errors.New("health: answer has no uptime")
}

// majorOf returns the major of a version such as "17.4.0" or "v18.0.1"
// (false: not a version).
func majorOf(v string) (int, bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	head, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(head)
	return n, err == nil && n >= 0
}

// objectRegistered asks the data API whether the replica has registered
// object name: 404 "not registered" vs 200, or 500 DATABASE_ERROR when its
// table is missing (registered, not servable: noTable).
func (p *prober) objectRegistered(ctx context.Context, name string) (registered, noTable bool, err error) {
	code, body, err := p.get(ctx, "/api/v1/data/"+url.PathEscape(name)+"?limit=1")
	if err != nil {
		return false, false, err
	}
	switch {
	case code == http.StatusNotFound:
		return false, false, nil
	case code >= 200 && code < 300:
		return true, false, nil
	case code == http.StatusInternalServerError && !bytes.Contains(body, []byte("not registered")):
		return true, bytes.Contains(body, []byte("DATABASE_ERROR")), nil
	}
	return false, false, fmt.Errorf("probe data api of %s: unexpected answer %d", name, code)
}

// layers reads /api/v1/meta/<type>/<name>/layers: code (what the replica
// holds in memory) beside overlay (the row).
func (p *prober) layers(ctx context.Context, typ, name string) (code, overlay map[string]any, err error) {
	path := "/api/v1/meta/" + url.PathEscape(typ) + "/" + url.PathEscape(name) + "/layers"
	status, body, err := p.get(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	if status == http.StatusNotFound {
		return nil, nil, nil
	}
	if status != http.StatusOK {
		return nil, nil, fmt.Errorf("probe %s layers of %s: unexpected answer %d", typ, name, status)
	}
	doc, err := decodeObject(body)
	if err != nil {
		return nil, nil, fmt.Errorf("probe %s layers of %s: %w", typ, name, err)
	}
	if _, has := doc["code"]; !has {
		if inner, ok := doc["data"].(map[string]any); ok {
			doc = inner
		}
	}
	code, _ = doc["code"].(map[string]any)
	overlay, _ = doc["overlay"].(map[string]any)
	return code, overlay, nil
}

// object checks an object entry: registered (or not, when deleted) and,
// when present, the in-memory copy matches the row.
func (p *prober) object(ctx context.Context, name string, deleted bool) (verdict, string, error) {
	reg, noTable, err := p.objectRegistered(ctx, name)
	if err != nil {
		return 0, "", err
	}
	if deleted {
		if reg {
			return lacks, "object " + name + " is still registered", nil
		}
		return inSync, "", nil
	}
	if !reg {
		return lacks, "object " + name + " is not registered", nil
	}
	code, overlay, err := p.layers(ctx, "object", name)
	if err != nil {
		return 0, "", err
	}
	if overlay == nil {
		// The row is not visible to the replica (yet): nothing to compare.
		return unseen, "replica does not see the row of object " + name + " (it still serves the object: nothing is published, a message would unregister it)", nil
	}
	if ok, why := objectApplied(code, overlay); !ok {
		return lacks, "object " + name + ": " + why, nil
	}
	// Registered as the row says: can it serve records? The nodes keep
	// them in the store's database, whose catalog tells; without it, the
	// data API's 500 tells a missing table (a missing column it does not:
	// reads recover from it, writes answer 400 Unknown field).
	if p.catalog != nil {
		missing, err := missingStorage(ctx, p.catalog, name, overlay)
		if err != nil {
			return 0, "", err
		}
		if missing != "" {
			return unservable, missing, nil
		}
		return inSync, "", nil
	}
	if noTable {
		return unservable, "object " + name + " has no table: the replica registered it, but its data API answers 500 DATABASE_ERROR", nil
	}
	return inSync, "", nil
}

// permission checks a permission set: 17.4 reloads permission sets only at
// boot, so an in-memory copy that differs from the row is stale.
func (p *prober) permission(ctx context.Context, name string, deleted bool) (verdict, string, error) {
	code, overlay, err := p.layers(ctx, "permission", name)
	if err != nil {
		return 0, "", err
	}
	if deleted {
		if code != nil && overlay == nil {
			return stale, "replica still enforces deleted permission set " + name, nil
		}
		return inSync, "", nil
	}
	if overlay == nil {
		return unobservable, "", nil
	}
	if code == nil {
		return stale, "replica has not loaded permission set " + name, nil
	}
	if path, ok := subset(overlay, code, ""); !ok {
		return stale, "replica enforces an older copy of permission set " + name + " (differs at " + path + ")", nil
	}
	return inSync, "", nil
}

// flow checks a flow: 17.4 loads flows only at boot (or through its own
// publish routes), so an in-memory copy that differs from the row is stale.
func (p *prober) flow(ctx context.Context, name string, deleted bool) (verdict, string, error) {
	status, body, err := p.get(ctx, "/api/v1/automation/"+url.PathEscape(name))
	if err != nil {
		return 0, "", err
	}
	var mem map[string]any
	switch status {
	case http.StatusOK:
		doc, err := decodeObject(body)
		if err != nil {
			return 0, "", fmt.Errorf("probe flow %s: %w", name, err)
		}
		mem = unwrap(doc, "flow")
	case http.StatusNotFound:
	case http.StatusNotImplemented:
		// The node runs without its automation service: no flows to see.
		return unobservable, "", nil
	default:
		return 0, "", fmt.Errorf("probe flow %s: unexpected answer %d", name, status)
	}
	if deleted {
		if mem != nil {
			return stale, "replica still runs deleted flow " + name, nil
		}
		return inSync, "", nil
	}
	_, overlay, err := p.layers(ctx, "flow", name)
	if err != nil {
		return 0, "", err
	}
	if overlay == nil {
		return unobservable, "", nil
	}
	if mem == nil {
		return stale, "replica has not loaded flow " + name, nil
	}
	if path, ok := subset(overlay, mem, ""); !ok {
		return stale, "replica runs an older copy of flow " + name + " (differs at " + path + ")", nil
	}
	return inSync, "", nil
}

// translation checks an authored translation: the replica serves its
// keys for its locale (the top-level locale, else the item's name). Routes
// the node does not have (no i18n service) and deletions, whose locale is
// gone with the row, are unobservable.
func (p *prober) translation(ctx context.Context, name string, deleted bool) (verdict, string, error) {
	if deleted {
		return unobservable, "", nil
	}
	_, overlay, err := p.layers(ctx, "translation", name)
	if err != nil {
		return 0, "", err
	}
	if overlay == nil {
		return unobservable, "", nil
	}
	locale, _ := overlay["locale"].(string)
	if locale == "" {
		locale = name
	}
	status, body, err := p.get(ctx, "/api/v1/i18n/translations/"+url.PathEscape(locale))
	if err != nil {
		return 0, "", err
	}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusNotImplemented:
		return unobservable, "", nil
	default:
		return 0, "", fmt.Errorf("probe translations %s: unexpected answer %d", locale, status)
	}
	doc, err := decodeObject(body)
	if err != nil {
		return 0, "", fmt.Errorf("probe translations %s: %w", locale, err)
	}
	if inner, ok := doc["data"].(map[string]any); ok {
		doc = inner
	}
	served, _ := doc["translations"].(map[string]any)
	for k, v := range overlay {
		if k == "name" || k == "locale" || strings.HasPrefix(k, "_") {
			continue
		}
		if path, ok := subset(v, served[k], k); !ok {
			return lacks, "translation " + name + " not served for " + locale + " (differs at " + path + ")", nil
		}
	}
	return inSync, "", nil
}

// datasource checks a datasource in the replica's list: an active one has
// a pool (status ok), a removed one has none. A datasource the replica does
// not list (it lists only those it knew at boot or created) is
// unobservable.
func (p *prober) datasource(ctx context.Context, name string, deleted bool) (verdict, string, error) {
	status, body, err := p.get(ctx, "/api/v1/datasources")
	if err != nil {
		return 0, "", err
	}
	if status != http.StatusOK {
		return 0, "", fmt.Errorf("probe datasources: unexpected answer %d", status)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, "", fmt.Errorf("probe datasources: unreadable answer: %w", err)
	}
	var found map[string]any
	for _, it := range listOf(doc, "datasources") {
		if m, ok := it.(map[string]any); ok && m["name"] == name {
			found = m
			break
		}
	}
	if found == nil {
		if deleted {
			return inSync, "", nil
		}
		return unobservable, "", nil
	}
	st, _ := found["status"].(string)
	switch {
	case deleted && st == "ok":
		return lacks, "datasource " + name + " still has a pool", nil
	case deleted:
		return inSync, "", nil
	case st == "ok":
		return inSync, "", nil
	case st == "unvalidated" || st == "":
		return lacks, "datasource " + name + " has no pool", nil
	}
	// Another status (an error the node reports): the pool was tried.
	return inSync, "", nil
}

func decodeObject(body []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("unreadable answer: %w", err)
	}
	return m, nil
}

// unwrap returns the item of an answer that may wrap it as {data: …} or
// {<name>: …}.
func unwrap(doc map[string]any, name string) map[string]any {
	for _, k := range []string{"data", name} {
		if inner, ok := doc[k].(map[string]any); ok && len(doc) <= 3 {
			if _, has := doc["name"]; !has {
				return unwrap(inner, name)
			}
		}
	}
	return doc
}

// listOf finds the list in an answer: a bare array, or one under data,
// items or key (possibly nested once).
func listOf(doc any, key string) []any {
	switch d := doc.(type) {
	case []any:
		return d
	case map[string]any:
		for _, k := range []string{key, "data", "items"} {
			if v, ok := d[k]; ok {
				if l := listOf(v, key); l != nil {
					return l
				}
			}
		}
	}
	return nil
}

// objectApplied says whether the in-memory copy of an object (code)
// serves its row (overlay): every key of the row matches code's, and
// code's fields that are not system fields are exactly the row's.
func objectApplied(code, overlay map[string]any) (bool, string) {
	if code == nil {
		return false, "not held in memory"
	}
	for k, ov := range overlay {
		if k == "fields" {
			continue
		}
		if path, ok := subset(ov, code[k], k); !ok {
			return false, "in-memory copy differs at " + path
		}
	}
	of, _ := overlay["fields"].(map[string]any)
	cf, _ := code["fields"].(map[string]any)
	for name, f := range of {
		if path, ok := subset(f, cf[name], "fields."+name); !ok {
			if cf[name] == nil {
				return false, "field " + name + " is not served"
			}
			return false, "in-memory copy differs at " + path
		}
	}
	for name, f := range cf {
		if _, ok := of[name]; ok {
			continue
		}
		if m, ok := f.(map[string]any); ok && m["system"] == true {
			continue
		}
		return false, "field " + name + " is still served"
	}
	return true, ""
}

// subset reports whether want is contained in got: every key of an object
// matches recursively (got may carry more keys, such as defaults the
// platform fills in), arrays match element by element, scalars are equal.
// On a mismatch it returns the path where they differ.
func subset(want, got any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range w {
			if p, ok := subset(v, g[k], join(path, k)); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := subset(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	case nil:
		return path, got == nil
	default:
		return path, want == got
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
