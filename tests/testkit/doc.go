// Package testkit holds the helpers that tests of every package share and
// that need nothing of this module: a raw RESP client and parser (Conn,
// ParseReply, AppendCmd), test certificates (PKI), a backend that answers
// with fixed replies (Canned), a small Redis over a map that can stall and
// lose its native compare-and-delete (FakeRedis), and a bounded wait for a
// condition (Eventually).
//
// It imports no package of this module, so that any package's own tests
// (redlock's included) can use it. Everything here is small and built on the
// standard testing package: helpers take a testing.TB, call its Helper, and
// clean up with its Cleanup.
package testkit
