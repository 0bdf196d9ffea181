package bench

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
)

// proxy is a TCP relay in front of PostgreSQL that counts what crosses the
// wire: round trips (a client burst after a server reply), bytes each way
// and DataRow messages (rows returned). It parses only message framing.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn

	roundTrips atomic.Int64
	bytesUp    atomic.Int64
	bytesDown  atomic.Int64
	dataRows   atomic.Int64
}

// wireCounts is a reading of a proxy's counters.
type wireCounts struct {
	RoundTrips, BytesUp, BytesDown, Rows int64
}

func (a wireCounts) sub(b wireCounts) wireCounts {
	return wireCounts{a.RoundTrips - b.RoundTrips, a.BytesUp - b.BytesUp, a.BytesDown - b.BytesDown, a.Rows - b.Rows}
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) counts() wireCounts {
	return wireCounts{p.roundTrips.Load(), p.bytesUp.Load(), p.bytesDown.Load(), p.dataRows.Load()}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var dir atomic.Int32 // last direction on this connection: 1 up, 2 down
		p.wg.Add(2)
		go p.relay(c, s, &dir, true)
		go p.relay(s, c, &dir, false)
	}
}

func (p *proxy) relay(from, to net.Conn, dir *atomic.Int32, up bool) {
	defer p.wg.Done()
	defer to.Close()
	var fr framer
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if up {
				if dir.Swap(1) != 1 {
					p.roundTrips.Add(1)
				}
				p.bytesUp.Add(int64(n))
			} else {
				dir.Store(2)
				p.bytesDown.Add(int64(n))
				p.dataRows.Add(fr.feed(buf[:n], 'D'))
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// framer follows the PostgreSQL backend message framing (1 type byte,
// int32 length including itself) across reads and counts messages of one
// type. Backend messages are typed from the first byte (no SSL here).
type framer struct {
	hdr  [5]byte
	nhdr int
	skip int
}

func (f *framer) feed(b []byte, want byte) int64 {
	var n int64
	for len(b) > 0 {
		if f.skip > 0 {
			k := min(f.skip, len(b))
			f.skip -= k
			b = b[k:]
			continue
		}
		k := copy(f.hdr[f.nhdr:], b)
		f.nhdr += k
		b = b[k:]
		if f.nhdr < 5 {
			continue
		}
		f.nhdr = 0
		l := int(binary.BigEndian.Uint32(f.hdr[1:5]))
		if f.hdr[0] == want {
			n++
		}
		f.skip = l - 4
	}
	return n
}
