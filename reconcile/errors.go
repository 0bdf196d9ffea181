package reconcile

import (
	"errors"
	"fmt"
)

// Class classifies a materialization failure.
type Class int

// The classes. Refused and Invalid hold the entry (no retry timer);
// Transient degrades it (retried with backoff).
const (
	ClassTransient Class = iota
	ClassRefused
	ClassInvalid
)

func (c Class) String() string {
	switch c {
	case ClassRefused:
		return "refused"
	case ClassInvalid:
		return "invalid"
	default:
		return "transient"
	}
}

// Failure is a classified materialization failure. Reason is shown to
// operators (items, drift, logs) and must never contain a secret.
type Failure struct {
	Class  Class
	Reason string
	Err    error // the cause, for errors.Is/As; not shown
	// Until, on a held failure, is closed when trying again may succeed
	// (a shared resource was freed): the loop then retries the entry once
	// at its next poll. nil: held until its signature changes.
	Until <-chan struct{}
}

func (f *Failure) Error() string { return f.Reason }

// Unwrap returns the cause.
func (f *Failure) Unwrap() error { return f.Err }

// Refused reports that upstream refused the entry (e.g. 401): held.
func Refused(err error, format string, args ...any) error {
	return &Failure{Class: ClassRefused, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Invalid reports that the entry cannot work as written: held.
func Invalid(err error, format string, args ...any) error {
	return &Failure{Class: ClassInvalid, Reason: fmt.Sprintf(format, args...), Err: err}
}

// HeldUntil reports that the entry cannot get a resource shared with other
// entries (a global budget): held, and retried once when until is closed.
func HeldUntil(until <-chan struct{}, err error, format string, args ...any) error {
	return &Failure{Class: ClassInvalid, Reason: fmt.Sprintf(format, args...), Err: err, Until: until}
}

// Transient reports a failure worth retrying: degraded.
func Transient(err error, format string, args ...any) error {
	return &Failure{Class: ClassTransient, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Classify returns the class and reason of a materialization error; an
// unclassified error is transient with its message as the reason.
func Classify(err error) (Class, string) {
	var f *Failure
	if errors.As(err, &f) {
		return f.Class, f.Reason
	}
	return ClassTransient, err.Error()
}
