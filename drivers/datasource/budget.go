package datasource

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// MaxTotalConnsKey is the config key of the budget all pools share.
const MaxTotalConnsKey = "datasource.max_total_conns"

// DefaultMaxTotalConns is the default of Options.MaxTotalConns.
const DefaultMaxTotalConns = 16

// errBudget is the cause of a connection the budget cannot give.
var errBudget = errors.New("no connection left in the budget shared by all datasources (" + MaxTotalConnsKey + ")")

// budget is the one budget of open connections every postgres pool of a
// Materializer draws from (datasource.max_total_conns), so that no set of
// rows, each within datasource.max_conns, can open more connections than
// it from one sidecar. A pool reserves its min (at least one connection)
// when it opens, for its life; connections above that are drawn while
// they are open and given back when they close.
type budget struct {
	mu    sync.Mutex
	total int
	used  int            // reserved + drawn
	byKey map[string]int // reservations of the live pools, per entry key
	freed chan struct{}  // closed (and replaced) when connections come back
}

func newBudget(total int) *budget {
	return &budget{total: total, byKey: make(map[string]int), freed: make(chan struct{})}
}

// reserve takes up to want connections (at least one) for a pool of the
// entry key, and returns how many it got (0: none left) and a channel
// closed when some come back. A rebuild may count the reservation of its
// entry's live pool as free: that pool closes once the new one is ready.
func (b *budget) reserve(key string, want int) (int, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	free := b.total - b.used + b.byKey[key]
	got := min(max(want, 1), free)
	if got <= 0 {
		return 0, b.freed
	}
	b.used += got
	b.byKey[key] += got
	return got, nil
}

// release gives back a pool's reservation.
func (b *budget) release(key string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byKey[key] -= n; b.byKey[key] <= 0 {
		delete(b.byKey, key)
	}
	b.giveLocked(n)
}

// draw takes one connection above a reservation; false when none is left.
func (b *budget) draw() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used >= b.total {
		return false
	}
	b.used++
	return true
}

func (b *budget) give(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.giveLocked(n)
}

func (b *budget) giveLocked(n int) {
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

// inUse is how many connections are reserved or drawn.
func (b *budget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// share is one pool's part of the budget: its reservation and the
// connections it has open (sockets, counted as they are dialed and
// closed: a TLS fallback's first attempt counts while it is open).
type share struct {
	b        *budget
	key      string
	reserved int

	mu   sync.Mutex
	open int
}

// dialer wraps the pool's dial function: a connection past the
// reservation is drawn from the budget or refused.
func (s *share) dialer(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !s.acquire() {
			return nil, errBudget
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			s.releaseOne()
			return nil, err
		}
		return &budgetConn{Conn: c, s: s}, nil
	}
}

func (s *share) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open < s.reserved || s.b.draw() {
		s.open++
		return true
	}
	return false
}

func (s *share) releaseOne() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.open >= s.reserved {
		s.b.give(1) // it was drawn
	}
}

// close gives back the reservation (after the pool closed its
// connections).
func (s *share) close() { s.b.release(s.key, s.reserved) }

// budgetConn gives its connection back to the budget when closed.
type budgetConn struct {
	net.Conn
	s    *share
	once sync.Once
}

func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.s.releaseOne)
	return err
}
