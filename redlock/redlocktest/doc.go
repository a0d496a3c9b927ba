// Package redlocktest has helpers for tests and benchmarks that drive
// redlock over real connections: Canned, a backend with fixed replies.
package redlocktest
