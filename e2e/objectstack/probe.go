//go:build objectstack

package objectstack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"
)

// ObjectState is what a node's data API says of an object: whether the
// node has it registered in memory (read-only probe).
type ObjectState string

// States of an object on a node.
const (
	// ObjectServed: `GET /api/v1/data/<obj>?limit=1` answers 200.
	ObjectServed ObjectState = "served"
	// ObjectNotRegistered: 404 OBJECT_NOT_FOUND ("Object '<obj>' is not
	// registered").
	ObjectNotRegistered ObjectState = "not-registered"
	// ObjectNoTable: registered, but its table does not exist (500
	// DATABASE_ERROR): a node that learns of an object through a lane
	// registers it and creates no table; only a writing node syncs DDL.
	ObjectNoTable ObjectState = "registered-no-table"
)

// ProbeObject tells whether the node has object obj registered.
func (c *Client) ProbeObject(obj string) (ObjectState, error) {
	resp, err := c.Do("GET", "/api/v1/data/"+url.PathEscape(obj)+"?limit=1", nil)
	if err != nil {
		return "", err
	}
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(resp.Body, &e)
	switch {
	case resp.Status == http.StatusOK:
		return ObjectServed, nil
	case resp.Status == http.StatusNotFound && e.Code == "OBJECT_NOT_FOUND":
		return ObjectNotRegistered, nil
	case resp.Status == http.StatusInternalServerError && e.Code == "DATABASE_ERROR":
		return ObjectNoTable, nil
	}
	return "", fmt.Errorf("probe object %s: %d %s", obj, resp.Status, tail(string(resp.Body), 500))
}

// ProbeField tells whether the node's in-memory copy of obj has field:
// `GET /api/v1/data/<obj>?limit=1&fields=id,<field>` answers 400
// INVALID_FIELD until it does (read-only).
func (c *Client) ProbeField(obj, field string) (bool, error) {
	resp, err := c.Do("GET", "/api/v1/data/"+url.PathEscape(obj)+"?limit=1&fields=id,"+url.QueryEscape(field), nil)
	if err != nil {
		return false, err
	}
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(resp.Body, &e)
	switch {
	case resp.Status == http.StatusBadRequest && e.Code == "INVALID_FIELD":
		return false, nil
	case resp.Status == http.StatusOK, resp.Status == http.StatusInternalServerError && e.Code == "DATABASE_ERROR":
		return true, nil // known field (a missing table fails after the field check)
	}
	return false, fmt.Errorf("probe field %s.%s: %d %s", obj, field, resp.Status, tail(string(resp.Body), 500))
}

// Layers is a node's `GET /api/v1/meta/<type>/<name>/layers`: Code is
// the copy the node holds in memory (and uses), Overlay the stored row.
type Layers struct {
	Code    map[string]any `json:"code"`
	Overlay map[string]any `json:"overlay"`
}

// Layers reads the layers of type/name.
func (c *Client) Layers(typ, name string) (Layers, error) {
	resp, err := c.Do("GET", "/api/v1/meta/"+url.PathEscape(typ)+"/"+url.PathEscape(name)+"/layers", nil)
	if err != nil {
		return Layers{}, err
	}
	if resp.Status != http.StatusOK {
		return Layers{}, fmt.Errorf("layers of %s/%s: %d %s", typ, name, resp.Status, tail(string(resp.Body), 500))
	}
	var l Layers
	if err := json.Unmarshal(resp.Body, &l); err != nil {
		return l, fmt.Errorf("decode layers of %s/%s: %w", typ, name, err)
	}
	return l, nil
}

// Applied tells whether the in-memory copy is the row: every overlay key
// deep-equals code's, and (objects) code's fields that are not
// `system: true` are exactly the overlay's. When not, it says what
// differs.
func (l Layers) Applied() (bool, string) {
	if l.Overlay == nil {
		return false, "no overlay (no row)"
	}
	if l.Code == nil {
		return false, "no code (not in memory)"
	}
	var diffs []string
	for k, ov := range l.Overlay {
		if k == "fields" {
			continue
		}
		if !reflect.DeepEqual(ov, l.Code[k]) {
			diffs = append(diffs, k)
		}
	}
	if of, ok := l.Overlay["fields"].(map[string]any); ok {
		cf, _ := l.Code["fields"].(map[string]any)
		for name, f := range of {
			if !reflect.DeepEqual(f, cf[name]) {
				diffs = append(diffs, "fields."+name)
			}
		}
		for name, f := range cf {
			if m, _ := f.(map[string]any); m["system"] == true {
				continue
			}
			if _, ok := of[name]; !ok {
				diffs = append(diffs, "fields."+name+" (only in memory)")
			}
		}
	}
	sort.Strings(diffs)
	return len(diffs) == 0, strings.Join(diffs, ", ")
}

// Uptime returns the node's uptime from its anonymous health endpoint: it
// going down means the node restarted.
func (n *Node) Uptime() (time.Duration, error) {
	h, err := n.Health()
	if err != nil {
		return 0, err
	}
	return time.Duration(h.Uptime * float64(time.Second)), nil
}
