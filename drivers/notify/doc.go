// Package notify tells outside receivers (a webhook, a command) what each
// reconcile pass changed; the replica beside the sidecar is driven by
// package replica instead. Two targets implement reconcile.Notifier:
//
//   - Webhook POSTs the change set as JSON, {"replica", "cursor",
//     "changes": [{"kind", "key", "action", "revision", "state"}]}, with
//     "X-Reconciler-Timestamp: <unix seconds>" and, when a secret is set,
//     "X-Reconciler-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">".
//     A receiver checks the signature and rejects timestamps far from its
//     clock, so a captured request cannot be replayed later. Without a
//     secret, requests go unsigned and Run warns at start. It retries with
//     backoff until upstream answers 2xx. The URL is redacted (query
//     tokens, a password) wherever it is logged.
//   - Exec runs a command (argv, no shell) with the change set as JSON on
//     stdin, one run at a time, each bounded by a timeout, retried with
//     backoff until it exits 0. The command gets a minimal environment
//     (ExecEnvKeys: PATH, HOME, USER, LOGNAME, LANG, LC_ALL, LC_CTYPE, TZ,
//     TMPDIR), never the daemon's own, which may hold tokens.
//
// Notify never blocks the loop: it merges the change set into a pending
// one and wakes the sender, the Run goroutine. Change sets that pile up
// while a delivery is in flight or backing off are coalesced into one: the
// last change per kind and key wins, and the newest cursor is sent. Change
// sets are address-only (no bodies, no secrets). What is still pending when
// Run's context ends is dropped: the next start's full sync reports
// everything again.
package notify
