// Package hashspec computes the ObjectStack platform's metadata checksum
// bit for bit: the platform's hashSpec (package @objectstack/metadata-core
// 17.4) is "sha256:" + hex(sha256(utf8(canonical))), where canonical is
// JSON.stringify of JSON.parse(body) with every object's keys re-inserted
// in sorted order. Reproducing it means reproducing JavaScript:
//
//   - Keys: JavaScript enumerates keys that are array indices (the
//     canonical decimals 0 … 4294967294: "9", "10", not "01", "-1" or
//     "4294967295") first, in ascending numeric order; the other keys
//     follow in the sort's order, which compares UTF-16 code units (so a
//     character beyond U+FFFF sorts before U+E000 … U+FFFF).
//   - Numbers are parsed to float64 (big integers lose precision, a
//     number beyond the float64 range is an error: the platform refuses
//     Infinity) and printed as Number.prototype.toString prints them:
//     shortest round trip, exponent form from 1e21 up and below 1e-6
//     ("1e+21", "1e-7"), -0 as 0.
//   - Strings are escaped as JSON.stringify escapes them: only '"', '\'
//     and U+0000 … U+001F (\b \f \n \r \t, else \u00xx, lower case); a
//     lone surrogate (which can only come from a \uXXXX escape in the
//     body) is written as a \udxxx escape.
//   - A "__proto__" key disappears (assigning it sets the prototype); of
//     duplicate keys the last one wins.
//   - The body is text: bytes that are not UTF-8 are read as the
//     platform's database driver reads a text column (Node's UTF-8
//     decoder): each maximal ill-formed subsequence becomes one U+FFFD.
//     A PostgreSQL text column never holds such bytes; a SQLite one can.
//
// The loop also hashes this canonical form into entry signatures, so one
// canonicalizer serves both: a body rewritten in another key order keeps
// its signature.
package hashspec
