package reconcile

import (
	"runtime"
	"sync"

	"github.com/objectstack-fleet/reconciler/metadata"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// parsing parses batches of metadata rows into nodes on every core while
// a relist reads the next ones.
type parsing struct {
	lim     metadata.Limits
	work    chan parseBatch
	wg      sync.WaitGroup
	mu      sync.Mutex
	done    []parseBatch // with their nodes
	started bool
}

type parseBatch struct {
	offset int
	rows   []snapshot.MetadataRow
	nodes  []*node
}

func newParsing(lim metadata.Limits) *parsing {
	return &parsing{lim: lim, work: make(chan parseBatch, 1024)}
}

// batch hands rows over to the workers, started with the first batch.
func (p *parsing) batch(offset int, rows []snapshot.MetadataRow) {
	if !p.started {
		p.started = true
		for range runtime.GOMAXPROCS(0) {
			p.wg.Go(p.parse)
		}
	}
	p.work <- parseBatch{offset: offset, rows: rows}
}

func (p *parsing) parse() {
	for b := range p.work {
		b.nodes = make([]*node, len(b.rows))
		for i := range b.rows {
			b.nodes[i] = metadataNode(&b.rows[i], p.lim)
		}
		p.mu.Lock()
		p.done = append(p.done, b)
		p.mu.Unlock()
	}
}

// wait returns the nodes of every row handed over, in row order (nil if
// a batch is missing).
func (p *parsing) wait() []*node {
	close(p.work)
	p.wg.Wait()
	n := 0
	for _, b := range p.done {
		n = max(n, b.offset+len(b.rows))
	}
	out := make([]*node, n)
	covered := 0
	for _, b := range p.done {
		copy(out[b.offset:], b.nodes)
		covered += len(b.rows)
	}
	if covered != n {
		return nil
	}
	return out
}
