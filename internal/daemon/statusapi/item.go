package statusapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Control explains and retries single entries; *reconcile.Reconciler
// satisfies it.
type Control interface {
	Explain(ctx context.Context, k registry.Kind, key string) (reconcile.Explanation, bool)
	ExplainKey(ctx context.Context, key string) []reconcile.Explanation
	RootCauses() []reconcile.RootCause
	Retry(ctx context.Context, refs []registry.Ref, held bool) error
}

// ItemBody is the JSON of GET /v1/item: the entry explained, with its
// replica state.
type ItemBody struct {
	reconcile.Explanation
	// Replica is the entry's state on the replica beside the sidecar
	// (absent: no replica driven).
	Replica *registry.ReplicaStatus `json:"replica,omitempty"`
}

// RetryBody is the JSON of POST /v1/item/retry.
type RetryBody struct {
	// Retried are the entries retried, as they are after the retry
	// (absent while the retry is still waiting for the loop).
	Retried []Item `json:"retried"`
	// Pending: the answer did not wait for the loop to get to it (it
	// still will).
	Pending bool `json:"pending,omitempty"`
}

// retryWait bounds how long POST /v1/item/retry waits for the loop's
// pass (it answers 202 after that; the retry still happens).
const retryWait = 60 * time.Second

// DefaultItemsLimit is the page size of /v1/items when limit is not given:
// every entry (the contract's whole list).
const DefaultItemsLimit = 0

// MaxItemsLimit caps limit.
const MaxItemsLimit = 100_000

// itemsParams are the parameters /v1/items takes.
var itemsParams = []string{"kind", "state", "org", "type", "package", "replica", "limit", "after", "root_causes"}

// parseItemsQuery reads the filters and paging of /v1/items.
func parseItemsQuery(q url.Values, replicaState func(registry.Kind, string) string) (rq registry.Query, keep func(registry.Entry) bool, rootCauses bool, err error) {
	for name := range q {
		known := false
		for _, p := range itemsParams {
			known = known || p == name
		}
		if !known {
			return rq, nil, false, fmt.Errorf("unknown parameter %q (want %s)", name, strings.Join(itemsParams, ", "))
		}
	}
	if s := q.Get("kind"); s != "" {
		if rq.Kind, err = registry.ParseKind(s); err != nil {
			return rq, nil, false, fmt.Errorf("kind: %w (an engine type goes in type=)", err)
		}
	}
	if s := q.Get("state"); s != "" {
		if rq.State, err = registry.ParseState(s); err != nil {
			return rq, nil, false, fmt.Errorf("state: %w (a replica state goes in replica=)", err)
		}
	}
	rq.Org, rq.Type, rq.Package = q.Get("org"), q.Get("type"), q.Get("package")
	if s := q.Get("replica"); s != "" {
		if _, err := registry.ParseReplicaState(s); err != nil {
			return rq, nil, false, fmt.Errorf("replica: %w", err)
		}
		if replicaState == nil {
			return rq, nil, false, fmt.Errorf("replica: no replica is driven (replica.url is empty)")
		}
		keep = func(e registry.Entry) bool { return replicaState(e.Kind, e.Key) == s }
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxItemsLimit {
			return rq, nil, false, fmt.Errorf("limit: want 1 to %d, got %q", MaxItemsLimit, s)
		}
		rq.Limit = n
	}
	if s := q.Get("after"); s != "" {
		k, key, ok := strings.Cut(s, "/")
		kind, err := registry.ParseKind(k)
		if !ok || err != nil || key == "" {
			return rq, nil, false, fmt.Errorf("after: want KIND/KEY (the last item of the previous page), got %q", s)
		}
		rq.AfterKind, rq.After = kind, key
	}
	if s := q.Get("root_causes"); s != "" {
		if rootCauses, err = strconv.ParseBool(s); err != nil {
			return rq, nil, false, fmt.Errorf("root_causes: want true or false, got %q", s)
		}
	}
	return rq, keep, rootCauses, nil
}

// pageChunk is how many entries a filtered page reads at a time when a
// filter the registry cannot apply (replica=) selects.
const pageChunk = 512

// selectPage returns the page rq selects, keeping only the entries keep
// selects (nil: all). keep is called outside the registries' locks.
func selectPage(view registry.View, rq registry.Query, keep func(registry.Entry) bool) []registry.Entry {
	if keep == nil {
		return view.Page(rq)
	}
	limit := rq.Limit
	rq.Limit = pageChunk
	out := []registry.Entry{}
	for {
		chunk := view.Page(rq)
		for _, e := range chunk {
			if keep(e) {
				out = append(out, e)
				if limit > 0 && len(out) == limit {
					return out
				}
			}
		}
		if len(chunk) < rq.Limit {
			return out
		}
		last := chunk[len(chunk)-1]
		rq.AfterKind, rq.After = last.Kind, last.Key
	}
}

// nextLink is the Link header of a full page: the same query, after its
// last item.
func nextLink(r *http.Request, last registry.Entry) string {
	q := r.URL.Query()
	q.Set("after", string(last.Kind)+"/"+last.Key)
	return fmt.Sprintf("<%s?%s>; rel=\"next\"", r.URL.Path, q.Encode())
}

// item serves GET /v1/item?kind=&key=: one entry explained, or without
// kind every entry under key (an array).
func (h *Handler) item(w http.ResponseWriter, r *http.Request) {
	kind, key, ok := h.itemAddress(w, r, "explaining")
	if !ok {
		return
	}
	if kind == "" {
		xs := h.o.Control.ExplainKey(r.Context(), key)
		if len(xs) == 0 {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no entry under key %q", key))
			return
		}
		out := make([]ItemBody, len(xs))
		for i, x := range xs {
			out[i] = h.itemBody(x)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	x, found := h.o.Control.Explain(r.Context(), kind, key)
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no %s entry under key %q", kind, key))
		return
	}
	writeJSON(w, http.StatusOK, h.itemBody(x))
}

func (h *Handler) itemBody(x reconcile.Explanation) ItemBody {
	b := ItemBody{Explanation: x}
	if h.o.Replica != nil {
		b.Replica = h.o.Replica.ItemReplica(x.Kind, x.Key)
	}
	return b
}

// itemAddress reads kind (optional) and key of /v1/item and
// /v1/item/retry, answering 400 itself when they are wrong, and 404 when
// the daemon has no control of entries (doing names the request in it:
// "explaining").
func (h *Handler) itemAddress(w http.ResponseWriter, r *http.Request, doing string) (registry.Kind, string, bool) {
	if h.o.Control == nil {
		writeError(w, http.StatusNotFound, doing+" entries is not enabled")
		return "", "", false
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed query string")
		return "", "", false
	}
	for name := range q {
		if name != "kind" && name != "key" && (name != "held" || r.Method != http.MethodPost) {
			want := "kind, key"
			if r.Method == http.MethodPost {
				want += ", held"
			}
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown parameter %q (want %s)", name, want))
			return "", "", false
		}
	}
	var kind registry.Kind
	if s := q.Get("kind"); s != "" {
		if kind, err = registry.ParseKind(s); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return "", "", false
		}
	}
	return kind, q.Get("key"), true
}

// retry serves POST /v1/item/retry?kind=&key= (without kind: every entry
// under key) and ?held=true (every held entry): the loop materializes them
// in its next pass; the answer waits for it (at most retryWait).
func (h *Handler) retry(w http.ResponseWriter, r *http.Request) {
	kind, key, ok := h.itemAddress(w, r, "retrying")
	if !ok {
		return
	}
	held := false
	if s := r.URL.Query().Get("held"); s != "" {
		var err error
		if held, err = strconv.ParseBool(s); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("held: want true or false, got %q", s))
			return
		}
	}
	var refs []registry.Ref
	switch {
	case key == "" && !held:
		writeError(w, http.StatusBadRequest, "want key= (and kind=) or held=true")
		return
	case key != "":
		view := h.o.Backend.Registries()
		for _, k := range registry.Kinds {
			if kind != "" && k != kind {
				continue
			}
			if _, ok := view.Get(k, key); ok {
				refs = append(refs, registry.Ref{Kind: k, Key: key})
			}
		}
		if len(refs) == 0 {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no entry under key %q", key))
			return
		}
	}
	if held {
		for _, e := range h.o.Backend.Registries().List("", registry.StateHeld) {
			refs = append(refs, registry.Ref{Kind: e.Kind, Key: e.Key})
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), retryWait)
	defer cancel()
	body := RetryBody{Retried: []Item{}}
	code := http.StatusOK
	if err := h.o.Control.Retry(ctx, refs, held); err != nil {
		code, body.Pending = http.StatusAccepted, true
	}
	view := h.o.Backend.Registries()
	for _, ref := range refs {
		if e, ok := view.Get(ref.Kind, ref.Key); ok {
			body.Retried = append(body.Retried, h.listItem(e))
		}
	}
	writeJSON(w, code, body)
}

// replicaStateFunc returns the replica state of an entry as the replica
// filter of /v1/items compares it (nil: no replica driven).
func (h *Handler) replicaStateFunc() func(registry.Kind, string) string {
	if h.o.Replica == nil {
		return nil
	}
	return func(k registry.Kind, key string) string {
		if st := h.o.Replica.ItemReplica(k, key); st != nil {
			return string(st.State)
		}
		return ""
	}
}

// listItem is e as /v1/items shows it.
func (h *Handler) listItem(e registry.Entry) Item {
	it := Item{Entry: e}
	if h.o.Replica != nil {
		it.Replica = h.o.Replica.ItemReplica(e.Kind, e.Key)
	}
	return it
}
