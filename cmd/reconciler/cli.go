package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/daemon/statusapi"
	"github.com/objectstack-fleet/reconciler/internal/redact"
)

// configFlag adds --config.
func configFlag(fs *pflag.FlagSet) {
	fs.String("config", "", "configuration file (default ./"+config.DefaultFile+" when present)")
}

// loadConfig loads the configuration from --config, the environment and
// the flags of fs named after keys.
func loadConfig(fs *pflag.FlagSet) (*config.Config, error) {
	file, _ := fs.GetString("config")
	return config.Load(config.Source{File: file, Flags: fs})
}

// newLogger builds the configured logger writing to w; level can be
// changed later (SIGHUP).
func newLogger(cfg *config.Config, w io.Writer) (*slog.Logger, *slog.LevelVar) {
	lv := new(slog.LevelVar)
	lv.Set(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: lv}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), lv
	}
	return slog.New(slog.NewTextHandler(w, opts)), lv
}

// clientFlags adds the flags of commands that ask the running daemon.
func clientFlags(fs *pflag.FlagSet) {
	configFlag(fs)
	fs.String("addr", "", "address of the running daemon's status API (default: status.listen)")
	config.AddFlags(fs, config.KeyStatusListen, config.KeyStatusTokenEnv)
}

func jsonFlag(fs *pflag.FlagSet) {
	fs.Bool("json", false, "print JSON instead of a table")
}

// client talks to a running daemon's status API.
type client struct {
	base  string
	token string
	http  *http.Client
}

func newClient(fs *pflag.FlagSet) (*client, error) {
	cfg, err := loadConfig(fs)
	if err != nil {
		return nil, err
	}
	addr, _ := fs.GetString("addr")
	if addr == "" {
		addr = cfg.StatusListen
	}
	base := addr
	if !strings.Contains(base, "://") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, usagef("--addr: want HOST:PORT or a URL, got %q", addr)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		base = "http://" + net.JoinHostPort(host, port)
	}
	c := &client{base: strings.TrimRight(base, "/"), http: &http.Client{Timeout: 30 * time.Second}}
	if cfg.StatusTokenEnv != "" {
		c.token = os.Getenv(cfg.StatusTokenEnv)
	}
	return c, nil
}

// answer sends a request and decodes its 2xx JSON answer into out; with
// asJSON it writes the answer as the daemon sent it to w instead of
// leaving the printing to the caller, and says so (printed).
func (c *client) answer(ctx context.Context, w io.Writer, asJSON bool, method, path string, out any) (printed bool, err error) {
	var raw []byte
	if err := c.do(ctx, method, path, out, &raw); err != nil {
		return false, err
	}
	if !asJSON {
		return false, nil
	}
	_, err = w.Write(raw)
	return true, err
}

// do sends a request and decodes a 2xx JSON answer into out (raw, if
// not nil, receives the body as is).
func (c *client) do(ctx context.Context, method, path string, out any, raw *[]byte) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", statusapi.BearerHeader(c.token))
	}
	if method == http.MethodPost {
		// The daemon refuses a POST of any other type (cross-site requests).
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("daemon not reachable at %s (is `reconciler run` running?): %w", redact.URL(c.base), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb statusapi.ErrorBody
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
			msg = eb.Error
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg += " (set status.token_env to the variable holding the daemon's token)"
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, clean(msg))
	}
	if raw != nil {
		*raw = body
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
	}
	return nil
}

// printJSON writes raw JSON (as the daemon sent it) or v indented.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// age prints how long ago t was, briefly.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// dash prints a row-derived string for a table: "-" when empty, escaped
// (clean) otherwise.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}
