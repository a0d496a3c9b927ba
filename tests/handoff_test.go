package tests

import (
	"slices"
	"sort"
	"testing"
	"time"
)

// Hand-off latency of the lock libraries that wait for a message
// (interop_srmutex_test.go, interop_rueidislock_test.go): how long after
// one holder's release a worker that was already waiting held the lock.

// heldWindow is one critical section of a worker that waited for it:
// when it started waiting, when it held the lock and when it released it,
// in nanoseconds of one monotonic clock.
type heldWindow struct {
	worker           int
	wait, start, end int64
}

// handoffGaps sorts ws by start, checks that no two overlap, and returns
// the gaps between a release and the next hold by another worker that
// was already waiting when the lock was released: a hand-off that only a
// wake-up can explain.
func handoffGaps(t *testing.T, ws []heldWindow) []time.Duration {
	t.Helper()
	plain := make([]window, len(ws))
	for i, w := range ws {
		plain[i] = window{worker: w.worker, start: w.start, end: w.end}
	}
	checkNoOverlap(t, plain)
	sort.Slice(ws, func(i, j int) bool { return ws[i].start < ws[j].start })
	var gaps []time.Duration
	for i := 1; i < len(ws); i++ {
		prev, next := ws[i-1], ws[i]
		if next.worker != prev.worker && next.wait < prev.end {
			gaps = append(gaps, time.Duration(next.start-prev.end))
		}
	}
	return gaps
}

// requirePrompt fails unless there are at least min hand-offs and each
// took less than limit, a bound far below the library's fallback
// (polling, or its context's deadline), logs their median and largest,
// and returns the median.
func requirePrompt(t *testing.T, what string, gaps []time.Duration, min int, limit time.Duration) time.Duration {
	t.Helper()
	if len(gaps) < min {
		t.Fatalf("%s: %d hand-offs to a waiting worker, want at least %d", what, len(gaps), min)
		return 0
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	median, largest := sorted[len(sorted)/2], sorted[len(sorted)-1]
	t.Logf("%s: %d hand-offs to a waiting worker, median %v, largest %v", what, len(gaps), median.Round(100*time.Microsecond), largest.Round(100*time.Microsecond))
	if largest >= limit {
		t.Errorf("%s: a hand-off took %v, want each under %v (the waiter was not woken by the release)", what, largest, limit)
	}
	return median
}
