package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">",
// the timestamp being TimestampHeader's value.
const SignatureHeader = "X-Reconciler-Signature"

// TimestampHeader carries the time of the attempt in Unix seconds. It is
// signed with the body, so a receiver that rejects old timestamps (say,
// more than five minutes off its clock) cannot be fed a replayed request.
const TimestampHeader = "X-Reconciler-Timestamp"

// DefaultWebhookTimeout bounds one webhook attempt.
const DefaultWebhookTimeout = 10 * time.Second

// WebhookOptions configure a Webhook. Zero values take the defaults.
type WebhookOptions struct {
	// URL receives the POSTs.
	URL string
	// Secret is the HMAC key (the daemon reads it from the environment
	// variable named by notify.webhook.secret_env). Empty: requests are
	// sent unsigned, and Run logs a warning saying so when it starts.
	Secret string
	// Now returns the time of an attempt (default time.Now).
	Now func() time.Time
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
	b      backoff.Policy
	log    *slog.Logger
}

var _ reconcile.Notifier = (*Webhook)(nil)

// NewWebhook returns a Webhook. It does no I/O.
func NewWebhook(opts WebhookOptions) *Webhook {
	w := &Webhook{opts: opts, client: opts.Client, q: newQueue(), b: newBackoff(opts.MinBackoff, opts.MaxBackoff), log: opts.Logger}
	if w.client == nil {
		w.own = http.DefaultTransport.(*http.Transport).Clone()
		// A redirect is an answer (not 2xx: retried), never followed: the
		// body and its signature go to the configured URL only.
		w.client = &http.Client{Transport: w.own, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if w.opts.Timeout <= 0 {
		w.opts.Timeout = DefaultWebhookTimeout
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.opts.Now == nil {
		w.opts.Now = time.Now
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
	if w.opts.Secret == "" {
		w.log.WarnContext(ctx, "webhook requests are not signed: anyone who can reach the URL can forge them (set notify.webhook.secret_env)",
			slog.String("url", redact.URL(w.opts.URL)))
	}
	return deliver(ctx, w.q, w.b, w.log, "webhook", w.send, w.opts.OnAttempt)
}

// Sign returns the signature header value of body sent with timestamp
// (TimestampHeader's value) under secret: "sha256=" and the hex
// HMAC-SHA256 of timestamp, ".", body.
func Sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
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
		return fmt.Errorf("build webhook request for %s: %w", redact.URL(w.opts.URL), unwrapURLError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	ts := strconv.FormatInt(w.opts.Now().Unix(), 10)
	req.Header.Set(TimestampHeader, ts)
	if w.opts.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(w.opts.Secret, ts, body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		// A *url.Error quotes the whole URL, query tokens included.
		return fmt.Errorf("post webhook %s: %w", redact.URL(w.opts.URL), unwrapURLError(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return nil
}

// unwrapURLError returns the cause of a *url.Error, whose message holds
// the URL unredacted.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
