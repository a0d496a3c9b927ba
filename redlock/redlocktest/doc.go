// Package redlocktest has the fixtures for tests and benchmarks of the
// packages above redlock (lease, tier, relay, commands, proxy): New, a Redlock over
// in-process miniredis backends, and Logger, which sends a component's log
// to the test's log.
//
// redlock's own tests cannot import it (it imports redlock); the helpers
// that need nothing of this module, which they share with everyone, are in
// tests/testkit.
package redlocktest
