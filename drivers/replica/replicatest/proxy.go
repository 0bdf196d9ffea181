package replicatest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// LossyProxy is a TCP proxy in front of a Redis server that loses a
// fraction of the PUBLISH commands going through it: a lost one is
// answered ":0" (no subscriber got it) and never reaches the server, as a
// message lost on the way would be. Everything else passes unchanged.
type LossyProxy struct {
	ln     net.Listener
	target string
	loss   atomic.Uint64 // math.Float64bits of the fraction
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}

	// Published and Dropped count PUBLISH commands seen and lost.
	Published, Dropped atomic.Int64
}

// NewLossyProxy listens on a free loopback port and forwards to target
// (host:port), losing loss (0..1) of the PUBLISH commands.
func NewLossyProxy(target string, loss float64) (*LossyProxy, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	p := &LossyProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.SetLoss(loss)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// SetLoss changes the fraction of PUBLISH commands lost.
func (p *LossyProxy) SetLoss(loss float64) { p.loss.Store(uint64(loss * 1e9)) }

func (p *LossyProxy) lossFraction() float64 { return float64(p.loss.Load()) / 1e9 }

// URL is redis://<proxy address>.
func (p *LossyProxy) URL() string { return "redis://" + p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits.
func (p *LossyProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *LossyProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *LossyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *LossyProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	p.track(client, true)
	p.track(server, true)
	defer p.track(client, false)
	defer p.track(server, false)
	var wmu sync.Mutex // the client gets server replies and synthesized ones
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				wmu.Lock()
				_, werr := client.Write(buf[:n])
				wmu.Unlock()
				if werr != nil {
					return
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	br := bufio.NewReader(client)
	for {
		raw, args, err := readCommand(br)
		if err != nil {
			break
		}
		if len(args) > 0 && strings.EqualFold(args[0], "PUBLISH") {
			p.Published.Add(1)
			if rand.Float64() < p.lossFraction() {
				p.Dropped.Add(1)
				wmu.Lock()
				_, err := client.Write([]byte(":0\r\n"))
				wmu.Unlock()
				if err != nil {
					break
				}
				continue
			}
		}
		if _, err := server.Write(raw); err != nil {
			break
		}
	}
	_ = server.Close()
	<-done
}

// readCommand reads one RESP array of bulk strings (what clients send) and
// returns its raw bytes and its arguments.
func readCommand(br *bufio.Reader) ([]byte, []string, error) {
	var raw bytes.Buffer
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, nil, err
	}
	raw.WriteString(line)
	if !strings.HasPrefix(line, "*") {
		return raw.Bytes(), strings.Fields(line), nil // an inline command
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, nil, errors.New("bad array header")
	}
	args := make([]string, 0, n)
	for range n {
		h, err := br.ReadString('\n')
		if err != nil {
			return nil, nil, err
		}
		raw.WriteString(h)
		size, err := strconv.Atoi(strings.TrimSpace(h[1:]))
		if err != nil || size < 0 {
			return nil, nil, errors.New("bad bulk header")
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, nil, err
		}
		raw.Write(b)
		args = append(args, string(b[:size]))
	}
	return raw.Bytes(), args, nil
}
