package registry

import "time"

// HistoryLen bounds the transitions an entry keeps (the oldest go first).
const HistoryLen = 20

// Transition is one change of an entry's state, reason or revision.
type Transition struct {
	At       time.Time `json:"at"`
	State    State     `json:"state"`
	Reason   string    `json:"reason,omitempty"`
	Revision int64     `json:"revision"`
}

// History is an entry's last transitions, oldest first, the first being
// its creation while fewer than HistoryLen happened. The zero value is
// empty. A copy handed out by the registry is read-only in effect: Add on
// it never writes where the stored entry's history lives.
type History struct{ marks []mark }

// mark is a transition as kept: 32 bytes (a steady entry keeps two, its
// creation and its first outcome, in one 64-byte allocation).
type mark struct {
	at     int64 // Unix milliseconds << stateBits | the state's index
	rev    int64
	reason string
}

const stateBits = 3

func stateIndex(s State) int64 {
	for i, st := range States {
		if st == s {
			return int64(i)
		}
	}
	return int64(len(States)) // unknown: shown as ""
}

func (m mark) transition() Transition {
	t := Transition{At: time.UnixMilli(m.at >> stateBits), Reason: m.reason, Revision: m.rev}
	if i := m.at & (1<<stateBits - 1); i < int64(len(States)) {
		t.State = States[i]
	}
	return t
}

// Add records a transition to state st with reason at revision rev, unless
// the last one recorded says the same (a retry that failed alike is not a
// transition).
func (h *History) Add(at time.Time, st State, reason string, rev int64) {
	m := mark{at: at.UnixMilli()<<stateBits | stateIndex(st), rev: rev, reason: reason}
	if n := len(h.marks); n > 0 {
		last := h.marks[n-1]
		if last.rev == rev && last.reason == reason && last.at&(1<<stateBits-1) == m.at&(1<<stateBits-1) {
			return
		}
	}
	if len(h.marks) < cap(h.marks) {
		// Beyond every copy's length: a copy never sees this slot.
		h.marks = append(h.marks, m)
		return
	}
	// A new array, sized to what is kept: copies keep the old one.
	keep := h.marks
	if len(keep) >= HistoryLen {
		keep = keep[len(keep)-HistoryLen+1:]
	}
	grown := make([]mark, len(keep), min(HistoryLen, len(keep)+2))
	copy(grown, keep)
	h.marks = append(grown, m)
}

// Len returns the number of transitions kept.
func (h History) Len() int { return len(h.marks) }

// List returns the transitions kept, oldest first.
func (h History) List() []Transition {
	out := make([]Transition, len(h.marks))
	for i, m := range h.marks {
		out[i] = m.transition()
	}
	return out
}

// clip makes a copy's history share nothing writable with the stored one.
func (h History) clip() History {
	return History{marks: h.marks[:len(h.marks):len(h.marks)]}
}
