package datasource

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// errCleartext is why a connection is dropped when the server asks for the
// password in cleartext over a connection that is not encrypted: sending
// it would hand it to whoever answers (a hostile row's server, or anyone
// on the path of an sslmode=prefer connection that declined TLS).
var errCleartext = errors.New("the server asked for the password in cleartext over an unencrypted connection: refused (use TLS, sslmode=require, or scram-sha-256)")

// guardCleartext is pgconn's AfterNetConnect: a connection without TLS
// watches the server's authentication requests and fails before pgx can
// answer AuthenticationCleartextPassword (MD5 and SCRAM never send the
// password itself). Over TLS, nothing is watched.
func guardCleartext(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
	if _, ok := c.(*tls.Conn); ok {
		return c, nil
	}
	return &cleartextGuard{Conn: c}, nil
}

// cleartextGuard reads the server's messages as they pass, until
// authentication is done, looking at each AuthenticationRequest ('R').
type cleartextGuard struct {
	net.Conn
	done bool
	hdr  [9]byte // message type, length, and an 'R' message's request code
	n    int     // bytes of hdr filled
	skip int     // bytes of the current message's body still to pass
}

func (g *cleartextGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if !g.done && n > 0 {
		if gerr := g.observe(p[:n]); gerr != nil {
			return 0, gerr
		}
	}
	return n, err
}

// Protocol constants: the authentication request message and its codes.
const (
	msgAuthentication = 'R'
	authOK            = 0
	authCleartext     = 3
)

func (g *cleartextGuard) observe(b []byte) error {
	for len(b) > 0 && !g.done {
		if g.skip > 0 {
			k := min(g.skip, len(b))
			g.skip -= k
			b = b[k:]
			continue
		}
		need := 5
		if g.n >= 5 && g.hdr[0] == msgAuthentication {
			need = 9
		}
		k := copy(g.hdr[g.n:need], b)
		g.n += k
		b = b[k:]
		if g.n < need || need == 5 && g.hdr[0] == msgAuthentication {
			continue
		}
		body := int(binary.BigEndian.Uint32(g.hdr[1:5])) - 4
		g.n = 0
		if g.hdr[0] != msgAuthentication {
			g.skip = max(0, body)
			continue
		}
		switch binary.BigEndian.Uint32(g.hdr[5:9]) {
		case authCleartext:
			return errCleartext
		case authOK:
			g.done = true
		}
		g.skip = max(0, body-4)
	}
	return nil
}
