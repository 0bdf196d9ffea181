package replica

import (
	"context"
	"log/slog"
	"time"
)

// heldError is a publish the Driver does not make: the replica runs a
// platform major whose lanes it does not speak (reason says which).
type heldError struct{ reason string }

func (e *heldError) Error() string { return e.reason }

// conditionMessages are the log lines of each condition: when it starts
// and when it ends.
var conditionMessages = map[string][2]string{
	condBus:        {"replica bus unavailable: lane messages wait for it", "replica bus available again"},
	condCredential: {"replica refused the credential: check replica.token_env", "replica accepts the credential again"},
	condVersion:    {"replica runs a platform version this reconciler does not drive: publishing nothing", "replica runs a platform version this reconciler drives again"},
}

// condition returns the error of cond while it lasts ("" when it does
// not).
func (d *Driver) condition(cond string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conds[cond]
}

// setCondition records that cond holds with errText ("": it ended),
// logging once when it starts and once when it ends (its error may change
// meanwhile: the last one is kept for status).
func (d *Driver) setCondition(ctx context.Context, cond, errText string) {
	d.mu.Lock()
	_, had := d.conds[cond]
	if errText == "" {
		delete(d.conds, cond)
	} else {
		d.conds[cond] = errText
		d.lastErr, d.lastAt = errText, time.Now()
	}
	d.mu.Unlock()
	msgs := conditionMessages[cond]
	switch {
	case errText != "" && !had:
		d.log.WarnContext(ctx, msgs[0], slog.String("error", errText))
	case errText == "" && had:
		d.log.InfoContext(ctx, msgs[1])
	}
	if m := d.opts.Metrics; m != nil {
		v := 0.0
		if errText != "" {
			v = 1
		}
		m.conditions.WithLabelValues(cond).Set(v)
	}
}
