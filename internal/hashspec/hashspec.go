package hashspec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Prefix starts every checksum the platform writes.
const Prefix = "sha256:"

// Errors returned, wrapped, by this package.
var (
	// ErrSyntax means the body is not a JSON text (JSON.parse would throw).
	ErrSyntax = errors.New("not valid JSON")
	// ErrUnrepresentable means the body is JSON the platform cannot
	// canonicalize: a number beyond the float64 range (Infinity) or
	// nesting deeper than MaxDepth.
	ErrUnrepresentable = errors.New("not representable by the platform's canonical form")
)

// MaxDepth bounds the nesting of arrays and objects. The platform's
// recursive canonicalizer runs out of stack far sooner (between 1,000 and
// 5,000 levels on Node's default stack), so no checksum it wrote is deeper.
const MaxDepth = 10000

// Checksum returns the platform's checksum of body: "sha256:" and 64 lower
// case hex digits.
func Checksum(body []byte) (string, error) {
	p := getParser()
	defer putParser(p)
	c, err := p.canonical(p.buf[:0], body)
	if err != nil {
		return "", err
	}
	p.buf = c[:0]
	sum := sha256.Sum256(c)
	var out [len(Prefix) + 2*sha256.Size]byte
	copy(out[:], Prefix)
	hex.Encode(out[len(Prefix):], sum[:])
	return string(out[:]), nil
}

// Canonical returns the exact text the platform hashes for body.
func Canonical(body []byte) ([]byte, error) {
	return AppendCanonical(make([]byte, 0, len(body)), body)
}

// AppendCanonical appends the canonical text of body to dst, as Canonical
// returns it; on error dst is returned unchanged.
func AppendCanonical(dst, body []byte) ([]byte, error) {
	p := getParser()
	defer putParser(p)
	return p.canonical(dst, body)
}

// parsers keeps parsers and their buffers between calls: a checksum is
// computed per row.
var parsers = sync.Pool{New: func() any { return new(parser) }}

func getParser() *parser { return parsers.Get().(*parser) }

// maxPooled bounds the buffers a pooled parser keeps.
const maxPooled = 1 << 20

func putParser(p *parser) {
	if cap(p.buf) > maxPooled || cap(p.scratch) > maxPooled || cap(p.keys) > maxPooled || cap(p.str) > maxPooled || cap(p.members) > maxPooled/64 {
		return
	}
	p.in, p.out = nil, nil
	parsers.Put(p)
}

func (p *parser) canonical(dst, body []byte) ([]byte, error) {
	p.in, p.pos, p.out, p.refused = body, 0, dst, false
	p.members, p.keys = p.members[:0], p.keys[:0]
	if cap(p.out)-len(p.out) < len(body) {
		p.out = slices.Grow(p.out, len(body)+16)
	}
	p.space()
	if err := p.value(0); err != nil {
		return dst, fmt.Errorf("platform checksum: %w", err)
	}
	p.space()
	if p.pos != len(p.in) {
		return dst, fmt.Errorf("platform checksum: %w: data after the JSON value at offset %d", ErrSyntax, p.pos)
	}
	if err := p.refusal(len(dst)); err != nil {
		return dst, fmt.Errorf("platform checksum: %w", err)
	}
	return p.out, nil
}
