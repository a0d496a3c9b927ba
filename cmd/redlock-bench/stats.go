package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// clientStats is what one client goroutine records during the measured
// phase. Only that goroutine writes it; the runner reads it after Wait.
type clientStats struct {
	cycle   []time.Duration // wall time of each successful acquire+release
	acquire []time.Duration // the acquire part of the same cycles
	busy    int64
	errs    errorTally
	// consecutive errors, to give up on a dead target instead of spinning.
	streak int
	gaveUp bool
}

// maxErrorStreak is how many errors in a row make a client give up.
const maxErrorStreak = 50

// newClientStats preallocates room for the expected number of samples.
func newClientStats(expect int) *clientStats {
	expect = min(max(expect, 1024), 1<<22)
	return &clientStats{cycle: make([]time.Duration, 0, expect), acquire: make([]time.Duration, 0, expect)}
}

// errorTally counts errors by message, keeping at most maxErrorKinds
// distinct messages (the rest are counted as "other").
type errorTally struct {
	total int64
	kinds map[string]int64
}

const maxErrorKinds = 16

func (t *errorTally) add(msg string, n int64) {
	if t.kinds == nil {
		t.kinds = map[string]int64{}
	}
	if _, ok := t.kinds[msg]; !ok && len(t.kinds) >= maxErrorKinds {
		msg = "(other errors)"
	}
	t.kinds[msg] += n
	t.total += n
}

func (t *errorTally) merge(o errorTally) {
	for msg, n := range o.kinds {
		t.add(msg, n)
	}
}

// errorCount is one line of the error summary.
type errorCount struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// sorted lists the messages, most frequent first.
func (t *errorTally) sorted() []errorCount {
	out := make([]errorCount, 0, len(t.kinds))
	for msg, n := range t.kinds {
		out = append(out, errorCount{msg, n})
	}
	slices.SortFunc(out, func(a, b errorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Error, b.Error))
	})
	return out
}

// mergeSorted concatenates the per-client samples and sorts them.
func mergeSorted(parts [][]time.Duration) []time.Duration {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	all := make([]time.Duration, 0, n)
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.Sort(all)
	return all
}

// percentile is the nearest-rank percentile of sorted samples: the smallest
// sample with at least p% of all samples at or below it. Zero for no samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// The epsilon keeps float error (99.9×1000/100 = 999.0000000000001)
	// from pushing the rank one sample up.
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	return sorted[min(max(rank, 1), n)-1]
}

// latency summarises one set of samples.
type latency struct {
	p50, p99, p999, max time.Duration
	mean                time.Duration
}

func summarize(sorted []time.Duration) latency {
	if len(sorted) == 0 {
		return latency{}
	}
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	return latency{
		p50:  percentile(sorted, 50),
		p99:  percentile(sorted, 99),
		p999: percentile(sorted, 99.9),
		max:  sorted[len(sorted)-1],
		mean: sum / time.Duration(len(sorted)),
	}
}
