package pgfake

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Cleartext is a hostile PostgreSQL server on a loopback port: it declines
// TLS and GSS encryption, asks every client for its password in cleartext
// (AuthenticationCleartextPassword) and counts the password messages it
// receives. It stops when the test ends.
type Cleartext struct {
	ln        net.Listener
	passwords atomic.Int64
	wg        sync.WaitGroup
}

// StartCleartext starts a Cleartext server.
func StartCleartext(t testing.TB) *Cleartext {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Cleartext{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

// Port is the server's port on 127.0.0.1.
func (s *Cleartext) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Passwords is how many password messages the server has received.
func (s *Cleartext) Passwords() int64 { return s.passwords.Load() }

func (s *Cleartext) serve(c net.Conn) {
	defer c.Close()
	for {
		var hdr [8]byte // startup packet: length, code
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n, code := binary.BigEndian.Uint32(hdr[:4]), binary.BigEndian.Uint32(hdr[4:])
		if code == 80877103 || code == 80877104 { // SSLRequest, GSSENCRequest: declined
			if _, err := c.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		if _, err := io.CopyN(io.Discard, c, int64(n)-8); err != nil {
			return
		}
		break
	}
	if _, err := c.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 3}); err != nil { // AuthenticationCleartextPassword
		return
	}
	var mh [5]byte // the answer's type and length
	if _, err := io.ReadFull(c, mh[:]); err == nil && mh[0] == 'p' {
		s.passwords.Add(1)
	}
}
