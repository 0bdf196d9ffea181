package chaos

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netPath is a network path the test owns: a veth pair between the test's
// namespace and a network namespace it creates, carrying only the test's
// own traffic. The far end can be taken down (a silent partition: packets
// are dropped, nothing answers, no RST).
type netPath struct {
	t            *testing.T
	ns           string // namespace name
	hostIf, nsIf string
	hostIP, nsIP string
}

// newNetPath creates the namespace and the veth pair; they are removed when
// the test ends. A machine where namespaces cannot be created fails the
// test saying why: the scenario is not skipped.
func newNetPath(t *testing.T) *netPath {
	t.Helper()
	suffix := randomHex(3)
	n := rand.IntN(250)
	p := &netPath{t: t, ns: "rcnet-" + suffix, hostIf: "rch" + suffix, nsIf: "rcn" + suffix,
		hostIP: fmt.Sprintf("10.213.%d.1", n), nsIP: fmt.Sprintf("10.213.%d.2", n)}
	if out, err := exec.Command("ip", "netns", "add", p.ns).CombinedOutput(); err != nil {
		t.Fatalf("network chaos needs network namespaces: `ip netns add %s` failed: %v: %s "+
			"(run `make chaos` as root on Linux with iproute2 installed)", p.ns, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", p.hostIf).Run()
		_ = exec.Command("ip", "netns", "del", p.ns).Run()
	})
	p.ip("link", "add", p.hostIf, "type", "veth", "peer", "name", p.nsIf)
	p.ip("link", "set", p.nsIf, "netns", p.ns)
	p.ip("addr", "add", p.hostIP+"/30", "dev", p.hostIf)
	p.ip("link", "set", p.hostIf, "up")
	p.inNS("addr", "add", p.nsIP+"/30", "dev", p.nsIf)
	p.inNS("link", "set", p.nsIf, "up")
	p.inNS("link", "set", "lo", "up")
	return p
}

func (p *netPath) ip(args ...string) {
	p.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		p.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (p *netPath) inNS(args ...string) {
	p.t.Helper()
	p.ip(append([]string{"netns", "exec", p.ns, "ip"}, args...)...)
}

// partition takes the namespace's end down: from then on every packet on
// the path is dropped without a word.
func (p *netPath) partition() { p.inNS("link", "set", p.nsIf, "down") }

// heal brings it back up.
func (p *netPath) heal() { p.inNS("link", "set", p.nsIf, "up") }

// listen opens a TCP listener inside the namespace, on its address. The
// socket is created on a thread moved into the namespace; that thread is
// thrown away afterwards (the goroutine exits locked), so no other
// goroutine ever runs in the namespace.
func (p *netPath) listen() net.Listener {
	p.t.Helper()
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		f, err := os.Open("/var/run/netns/" + p.ns)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("setns %s: %w", p.ns, err)}
			return
		}
		l, err := net.Listen("tcp", p.nsIP+":0")
		ch <- res{l, err}
	}()
	r := <-ch
	if r.err != nil {
		p.t.Fatalf("listen in namespace %s: %v", p.ns, r.err)
	}
	return r.l
}

// slowProxy forwards TCP connections to a target, adding a one-way delay
// to every chunk in each direction (so a round trip gains 2×delay) and,
// with probability loss, the delay of a TCP retransmission on top (the
// kernel here has no netem qdisc; a lost segment costs TCP at least its
// minimum RTO, 200 ms, before the bytes arrive, in order).
type slowProxy struct {
	l      net.Listener
	target string
	delay  time.Duration
	loss   float64
	on     atomic.Bool // shaping on
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

const retransmitDelay = 200 * time.Millisecond

func startSlowProxy(t *testing.T, l net.Listener, target string, delay time.Duration, loss float64) *slowProxy {
	p := &slowProxy{l: l, target: target, delay: delay, loss: loss}
	p.on.Store(true)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *slowProxy) addr() string { return p.l.Addr().String() }

func (p *slowProxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *slowProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies src to dst, each chunk delivered delay (plus a
// retransmission, at the loss rate) after it was read, in order.
func (p *slowProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d) // the emulated wire delay itself
			}
			if _, err := dst.Write(c.b); err != nil {
				_ = src.Close()
				for range q {
				}
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	buf := make([]byte, 32<<10)
	var last time.Time
	for {
		n, err := src.Read(buf)
		if n > 0 {
			at := time.Now()
			if p.on.Load() {
				at = at.Add(p.delay)
				if rand.Float64() < p.loss {
					at = at.Add(retransmitDelay)
				}
			}
			if at.Before(last) {
				at = last // in order, as TCP delivers
			}
			last = at
			q <- chunk{append([]byte(nil), buf[:n]...), at}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}
