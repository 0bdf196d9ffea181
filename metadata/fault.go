package metadata

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinels for errors.Is. Every *Fault is ErrInvalid; a checksum that does
// not match is also ErrChecksum, and a body above a cap is also ErrLimit.
var (
	ErrInvalid  = errors.New("invalid metadata")
	ErrChecksum = errors.New("checksum mismatch")
	ErrLimit    = errors.New("metadata above a cap")
)

// Fault is one reason a body is not valid. Path names the member at fault
// ("fields.owner_id.reference"; "" for the body as a whole) and Msg says
// what is wrong with it ("must be a string"). Error joins the two. Neither
// ever holds more than a short, quoted excerpt of the body.
type Fault struct {
	Path string
	Msg  string
	kind error // ErrChecksum, ErrLimit, a driver's cause (FaultOf) or nil
}

func (f *Fault) Error() string {
	if f.Path == "" {
		return f.Msg
	}
	return f.Path + " " + f.Msg
}

// Unwrap returns ErrInvalid, and ErrChecksum, ErrLimit or FaultOf's cause
// when the fault is one of those.
func (f *Fault) Unwrap() []error {
	if f.kind != nil {
		return []error{ErrInvalid, f.kind}
	}
	return []error{ErrInvalid}
}

func faultf(path, format string, args ...any) *Fault {
	return &Fault{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// maxQuoted bounds how much of a key or name a fault quotes.
const maxQuoted = 64

// quote returns s as a Go-quoted string (control characters escaped),
// shortened to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// member returns the path of member key of the object at path: "a.b" for
// identifier-like keys, `a["x.y"]` otherwise.
func member(path, key string) string {
	if !isIdent(key) {
		return path + "[" + quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// index returns the path of element i of the array at path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func isIdent(s string) bool {
	if s == "" || len(s) > maxQuoted {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// blank reports whether s is empty or only white space, which the platform
// treats as no name at all.
func blank(s string) bool {
	if s != "" && s[0] > ' ' && s[0] < utf8.RuneSelf {
		return false // the usual name: no need to trim it (ASCII spaces are <= ' ')
	}
	return strings.TrimSpace(s) == ""
}
