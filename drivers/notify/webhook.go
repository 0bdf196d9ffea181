package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
)

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the body>".
const SignatureHeader = "X-Reconciler-Signature"

// DefaultWebhookTimeout bounds one webhook attempt.
const DefaultWebhookTimeout = 10 * time.Second

// WebhookOptions configure a Webhook. Zero values take the defaults.
type WebhookOptions struct {
	// URL receives the POSTs.
	URL string
	// Secret is the HMAC key (the daemon reads it from the environment
	// variable named by notify.webhook.secret_env). Empty: requests are
	// sent unsigned.
	Secret string
	// Client sends the requests (default: a client of its own).
	Client *http.Client
	// Timeout bounds each attempt (default 10s).
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed attempts,
	// doubling from min to max (default 200ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// OnAttempt, if set, is called by the sender after every attempt with
	// the change set sent and its outcome (nil: delivered).
	OnAttempt func(cs reconcile.ChangeSet, err error)
	// Logger; default discards.
	Logger *slog.Logger
}

// Webhook POSTs change sets to a URL. Create it with NewWebhook, run Run
// in a goroutine, and hand it to the loop as its Notifier.
type Webhook struct {
	opts   WebhookOptions
	client *http.Client
	own    *http.Transport
	q      *queue
	b      backoff
	log    *slog.Logger
}

var _ reconcile.Notifier = (*Webhook)(nil)

// NewWebhook returns a Webhook. It does no I/O.
func NewWebhook(opts WebhookOptions) *Webhook {
	w := &Webhook{opts: opts, client: opts.Client, q: newQueue(), b: newBackoff(opts.MinBackoff, opts.MaxBackoff), log: opts.Logger}
	if w.client == nil {
		w.own = http.DefaultTransport.(*http.Transport).Clone()
		w.client = &http.Client{Transport: w.own}
	}
	if w.opts.Timeout <= 0 {
		w.opts.Timeout = DefaultWebhookTimeout
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w
}

// Notify queues cs for delivery, coalescing with what is pending. It never
// blocks.
func (w *Webhook) Notify(cs reconcile.ChangeSet) { w.q.put(cs) }

// Run delivers queued change sets until ctx ends, then returns nil.
func (w *Webhook) Run(ctx context.Context) error {
	if w.own != nil {
		defer w.own.CloseIdleConnections()
	}
	return deliver(ctx, w.q, w.b, w.log, "webhook", w.send, w.opts.OnAttempt)
}

// Sign returns the signature header value of body under secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (w *Webhook) send(ctx context.Context, cs reconcile.ChangeSet) error {
	body, err := json.Marshal(payload(cs))
	if err != nil {
		return fmt.Errorf("encode change set: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.opts.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if w.opts.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(w.opts.Secret, body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("post webhook: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return nil
}
