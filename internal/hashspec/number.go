package hashspec

import (
	"fmt"
	"math"
	"strconv"
)

// appendNumber appends the JSON number tok as JavaScript prints the
// float64 that JSON.parse makes of it (Number.prototype.toString).
func appendNumber(out, tok []byte) ([]byte, error) {
	f, err := strconv.ParseFloat(string(tok), 64)
	if math.IsInf(f, 0) {
		return out, ErrUnrepresentable
	}
	if err != nil { // cannot happen: the grammar was checked
		return out, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return appendFloat(out, f), nil
}

// appendFloat prints f as ECMAScript's Number::toString(f, 10): with k
// the shortest digits that round-trip and n the decimal exponent such that
// f = 0.digits × 10^n, positional notation when -6 < n <= 21, else
// d.ddde±x.
func appendFloat(out []byte, f float64) []byte {
	if f == 0 {
		return append(out, '0') // -0 too
	}
	if f < 0 {
		out = append(out, '-')
		f = -f
	}
	// 'e' with precision -1 gives the shortest round-trip digits:
	// d[.ddd]e±xx.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [17]byte
	k := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[k] = e[i]
			k++
		}
	}
	x, _ := strconv.Atoi(string(e[i+1:]))
	n := x + 1
	d := digits[:k]
	switch {
	case k <= n && n <= 21:
		out = append(out, d...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, d[:n]...)
		out = append(out, '.')
		out = append(out, d[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, d...)
	default:
		out = append(out, d[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, d[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, int64(n-1), 10)
	}
	return out
}
