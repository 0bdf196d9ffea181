//go:build objectstack

package objectstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// Client calls a node's HTTP API as one user (Authorization: Bearer).
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client of the API at base (http://host:port) sending
// token as a bearer token ("" for anonymous calls).
func NewClient(base, token string) *Client {
	return &Client{base: base, token: token, http: &http.Client{Timeout: 30 * time.Second}}
}

// Response is one answer of the API.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends method path with body (nil: none; []byte or json.RawMessage:
// sent as is; anything else: JSON-encoded).
func (c *Client) Do(method, path string, body any) (*Response, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case json.RawMessage:
		r = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode body of %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Must sends the request and fails the test unless the answer's status is
// want.
func (c *Client) Must(t testing.TB, want int, method, path string, body any) *Response {
	t.Helper()
	resp, err := c.Do(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.Status, want, resp.Body)
	}
	return resp
}

// SaveResult is the answer of a metadata save.
type SaveResult struct {
	Success bool   `json:"success"`
	Version string `json:"version"` // the stored checksum
	State   string `json:"state"`
	Message string `json:"message"`
}

// SaveMeta saves (creates or replaces) item type/name with body through
// `PUT /api/v1/meta/<type>/<name>`, the platform's metadata door, and
// fails the test unless it was saved.
func (c *Client) SaveMeta(t testing.TB, typ, name string, body []byte) SaveResult {
	t.Helper()
	resp := c.Must(t, http.StatusOK, "PUT", "/api/v1/meta/"+url.PathEscape(typ)+"/"+url.PathEscape(name), body)
	var out SaveResult
	if err := json.Unmarshal(resp.Body, &out); err != nil || !out.Success {
		t.Fatalf("save %s/%s: %s", typ, name, resp.Body)
	}
	return out
}

// DeleteMeta deletes item type/name through `DELETE /api/v1/meta/<type>/<name>`.
func (c *Client) DeleteMeta(t testing.TB, typ, name string) {
	t.Helper()
	c.Must(t, http.StatusOK, "DELETE", "/api/v1/meta/"+url.PathEscape(typ)+"/"+url.PathEscape(name), nil)
}

// Datasource is the platform's summary of a datasource in the
// datasources API.
type Datasource struct {
	Name       string `json:"name"`
	Label      string `json:"label"`
	Driver     string `json:"driver"`
	SchemaMode string `json:"schemaMode"`
	Origin     string `json:"origin"`
	Active     bool   `json:"active"`
	Status     string `json:"status"`
}

// CreateDatasource creates a runtime datasource through
// `POST /api/v1/datasources` ({...draft, secret}): the platform stores the
// draft as a sys_metadata row of type datasource and the secret, encrypted,
// as a sys_secret row the row's external.credentialsRef names.
func (c *Client) CreateDatasource(t testing.TB, draft map[string]any, secret string) Datasource {
	t.Helper()
	body := map[string]any{}
	for k, v := range draft {
		body[k] = v
	}
	body["secret"] = secret
	resp := c.Must(t, http.StatusCreated, "POST", "/api/v1/datasources", body)
	var out struct {
		Data struct {
			Datasource Datasource `json:"datasource"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		t.Fatalf("decode created datasource: %v: %s", err, resp.Body)
	}
	return out.Data.Datasource
}

// Datasources lists the datasources the node knows (`GET /api/v1/datasources`).
func (c *Client) Datasources() ([]Datasource, error) {
	resp, err := c.Do("GET", "/api/v1/datasources", nil)
	if err != nil {
		return nil, err
	}
	if resp.Status != http.StatusOK {
		return nil, fmt.Errorf("list datasources: %d %s", resp.Status, resp.Body)
	}
	var out struct {
		Data struct {
			Datasources []Datasource `json:"datasources"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, fmt.Errorf("decode datasources: %w: %s", err, resp.Body)
	}
	return out.Data.Datasources, nil
}
