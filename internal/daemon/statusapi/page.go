package statusapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	_ "embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// The status page: GET / renders this replica at a glance for a person,
// server-side, with no script and no external asset; it refreshes itself.
// Every string derived from a row (keys, reasons, replica ids, errors) is
// escaped by html/template.

//go:embed page.html.tmpl
var pageSource string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"age":      pageAge,
	"seconds":  func(s float64) string { return pageAge(time.Duration(s * float64(time.Second))) },
	"stateCSS": func(s string) string { return "st-" + strings.Map(cssSafe, s) },
}).Parse(pageSource))

//go:embed item.html.tmpl
var itemPageSource string

// itemPageTemplate renders one entry explained (GET /item), linked from
// the page's not-ready items.
var itemPageTemplate = template.Must(template.New("item").Funcs(template.FuncMap{
	"age":      pageAge,
	"stateCSS": func(s string) string { return "st-" + strings.Map(cssSafe, s) },
}).Parse(itemPageSource))

// itemPageData is what the item page shows.
type itemPageData struct {
	ItemBody
	Now time.Time
}

// itemPage serves GET /item?kind=&key=: the entry explained, for people.
func (h *Handler) itemPage(w http.ResponseWriter, r *http.Request) {
	kind, key, ok := h.itemAddress(w, r, "explaining")
	if !ok {
		return
	}
	if kind == "" {
		writeError(w, http.StatusBadRequest, "want kind= and key=")
		return
	}
	x, found := h.o.Control.Explain(r.Context(), kind, key)
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no %s entry under key %q", kind, key))
		return
	}
	h.writePage(w, r, itemPageTemplate, itemPageData{ItemBody: h.itemBody(x), Now: time.Now()})
}

// pageRefresh is how often the page reloads itself.
const pageRefresh = 5 * time.Second

// fleetTimeout bounds the page's read of the fleet from the store.
const fleetTimeout = 3 * time.Second

// pageItem is a non-ready entry on the page.
type pageItem struct {
	registry.Entry
	Replica *registry.ReplicaStatus
}

type pageCounts struct {
	Kind   registry.Kind
	Counts []int
	Total  int
}

type pageKV struct{ Key, Value string }

type pageData struct {
	Now          time.Time
	Refresh      int
	Version      string
	Store        string
	Status       StatusBodyView
	States       []registry.State
	Counts       []pageCounts
	NotReady     []pageItem
	Replica      []pageKV // the replica summary, flattened
	ReplicaItems []registry.ReplicaItem
	Driven       bool
	Fleet        *fleet.View
	FleetError   string
	FleetOff     bool
	// Explain: the not-ready items link to their explanation (GET /item).
	Explain bool
	Guard   reconcile.GuardStatus
}

// StatusBodyView is the part of the loop's status the page shows.
type StatusBodyView struct {
	ReplicaID     string
	Synced        bool
	StoreUp       bool
	StartedAt     time.Time
	Cursor        string
	CursorAt      time.Time
	LagSeconds    float64
	LastError     string
	Pending       int64
	Blockers      []string
	Passes        int64
	LastPassAt    time.Time
	LastPassCause string
}

// page serves GET /.
func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	h.writePage(w, r, pageTemplate, h.pageData(r.Context()))
}

// writePage renders t with data as a page: no script, no external asset,
// no framing, no referrer.
func (h *Handler) writePage(w http.ResponseWriter, r *http.Request, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		h.o.Logger.ErrorContext(r.Context(), "status page failed", slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "status page failed")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// No script, no external asset, no framing, no referrer.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(neutralize(buf.Bytes()))
}

func (h *Handler) pageData(ctx context.Context) pageData {
	st := h.o.Backend.Status()
	d := pageData{
		Now: time.Now(), Refresh: int(pageRefresh / time.Second), Version: h.o.Version, Store: h.o.Store,
		States: registry.States,
		Status: StatusBodyView{
			ReplicaID: st.ReplicaID, Synced: st.Synced, StoreUp: st.StoreUp, StartedAt: st.StartedAt,
			Cursor: st.Cursor.String(), CursorAt: st.Cursor.At, LagSeconds: st.LagSeconds,
			LastError: st.LastError, Pending: st.Stall.Pending, Passes: st.Passes,
		},
	}
	d.Guard = st.Guard
	for _, b := range st.Stall.Blockers {
		d.Status.Blockers = append(d.Status.Blockers, fmt.Sprintf("pid %d, open %s (%s)", b.PID, pageAge(b.XactAge), b.State))
	}
	if st.LastPass != nil {
		d.Status.LastPassAt = st.LastPass.At
		d.Status.LastPassCause = string(st.LastPass.Cause)
	}
	for _, k := range registry.Kinds {
		c := pageCounts{Kind: k}
		for _, s := range registry.States {
			n := st.Counts[k][s]
			c.Counts = append(c.Counts, n)
			c.Total += n
		}
		d.Counts = append(d.Counts, c)
	}
	d.Explain = h.o.Control != nil
	entries := h.o.Backend.Registries().List("", "")
	for _, e := range entries {
		var rs *registry.ReplicaStatus
		if h.o.Replica != nil {
			rs = h.o.Replica.ItemReplica(e.Kind, e.Key)
			if rs != nil && !rs.State.Settled() {
				d.ReplicaItems = append(d.ReplicaItems, registry.ReplicaItem{Kind: e.Kind, Key: e.Key, ReplicaStatus: *rs})
			}
		}
		if e.State != registry.StateReady {
			d.NotReady = append(d.NotReady, pageItem{Entry: e, Replica: rs})
		}
	}
	sort.SliceStable(d.NotReady, func(i, j int) bool { return d.NotReady[i].Since.Before(d.NotReady[j].Since) })
	if h.o.Replica != nil {
		if s := h.o.Replica.ReplicaSummary(); s != nil {
			d.Driven = true
			d.Replica = replicaSummary(s)
		}
	}
	if h.o.Fleet == nil {
		d.FleetOff = true
	} else {
		fctx, cancel := context.WithTimeout(ctx, fleetTimeout)
		defer cancel()
		if v, err := h.o.Fleet(fctx); err != nil {
			d.FleetError = err.Error()
		} else {
			v = v.Visible() // replicas stopped long ago are not the fleet
			d.Fleet = &v
		}
	}
	return d
}

// replicaSummary lists the replica's summary as the page shows it: reachable,
// restarts and the count of every replica state (0 included).
func replicaSummary(r *registry.ReplicaReport) []pageKV {
	out := []pageKV{{"reachable", fmt.Sprint(r.Reachable)}, {"restarts", fmt.Sprint(r.Restarts)}}
	for _, s := range registry.ReplicaStates {
		out = append(out, pageKV{"states." + string(s), fmt.Sprint(r.Counts[s])})
	}
	if rs := r.Restart; rs != nil {
		phase := string(rs.Phase)
		if rs.Reason != "" {
			phase += ": " + rs.Reason
		}
		out = append(out, pageKV{"restart", phase})
		if !rs.LastAt.IsZero() {
			out = append(out, pageKV{"last restart", rs.LastAt.UTC().Format(time.RFC3339) + " " + string(rs.LastResult) + " " + rs.LastReason})
		}
		if rs.NoLanes != "" {
			out = append(out, pageKV{"no lanes", rs.NoLanes})
		}
	}
	return out
}

// pageAge prints a duration briefly ("3.2s", "4m10s", "2h5m").
func pageAge(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

func cssSafe(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
		return r
	}
	return '-'
}

// pageAuth guards the page: with a token configured it accepts the API's
// bearer token, or HTTP Basic authentication with the token as the
// password (any user name), which a browser asks for by itself and keeps
// sending on each refresh. Without a token the page is open like the API.
func (h *Handler) pageAuth(next http.Handler) http.Handler {
	if h.o.Token == "" {
		return next
	}
	bearer := []byte("Bearer " + h.o.Token)
	token := []byte(h.o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), bearer) == 1
		if _, pw, basic := r.BasicAuth(); !ok && basic {
			ok = subtle.ConstantTimeCompare([]byte(pw), token) == 1
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="reconciler", charset="UTF-8"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong token (user: any, password: the status token)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// neutralize shows, as text (\u202e), the characters html/template leaves
// as they are but that rearrange or split what a reader sees: format
// characters (bidi overrides and isolates, zero-width ones), the line and
// paragraph separators, and C1 controls — as the CLI's tables do. The
// page's own markup has none of them: any comes from a row.
func neutralize(page []byte) []byte {
	if !bytes.ContainsFunc(page, hiddenRune) {
		return page
	}
	out := make([]byte, 0, len(page)+64)
	for _, r := range string(page) {
		if hiddenRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	return out
}

func hiddenRune(r rune) bool {
	return unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' || r >= 0x80 && r < 0xa0
}
