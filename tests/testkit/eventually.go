package testkit

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails the test when it still
// does not after within. Tests wait for a condition with it instead of
// sleeping for a time a loaded machine may need more of: within is a
// bound, not an expected duration, and should be generous (seconds).
func Eventually(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("still waiting after %v for %s", within, what)
		}
		time.Sleep(pause)
	}
}
