// Package canonjson produces canonical JSON (DESIGN §3): object keys sorted,
// no insignificant whitespace, UTF-8, with strings and numbers printed as
// ECMAScript's JSON.stringify prints them (the platform's writers are
// JavaScript, so their checksums match ours). It is used for
// signatures and for verifying metadata checksums.
package canonjson
