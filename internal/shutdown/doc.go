// Package shutdown turns one stop budget into one context with a
// deadline, made once when the stop begins, and lets each phase of the
// stop take what it needs from that deadline (as controller-runtime turns
// GracefulShutdownTimeout into one shutdownCtx).
//
// Phases run in order and end by absolute times, so a slow phase cannot
// push the whole stop past its budget: the last phase runs on the stop's
// context, each earlier one on [Leave] of the next one's context, leaving
// that phase what it needs.
package shutdown
