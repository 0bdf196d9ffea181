// Package pgfake holds hostile PostgreSQL servers for tests: Cleartext
// speaks just enough of the protocol to ask a client for its password in
// cleartext over an unencrypted connection, and counts the passwords it
// is sent, so a test can show that a client refuses before sending one.
package pgfake
