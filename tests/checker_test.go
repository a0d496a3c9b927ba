package tests

// The mutual-exclusion checker of the chaos tests (chaos_test.go), in the
// style of Jepsen's lock workload: workers record every grant as the window
// during which the client believed it held the lock, and the checker, run
// over the whole history afterwards, looks for two windows of one resource
// that overlap and for fencing tokens that do not strictly increase.

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// grant is one successful acquisition as its client saw it. Times carry
// Go's monotonic reading, so wall-clock steps do not move them.
//
// The client believes it holds the lock from Start (the grant's reply
// arrived) until End: at most Sent + validity, because the server measures
// validity from a moment no earlier than Sent, and cut short when the
// client sends its release.
type grant struct {
	Resource string
	Worker   int
	Token    string
	Fence    int64
	HasFence bool
	Sent     time.Time // the request went out (t0)
	Start    time.Time // the grant's reply arrived (t1)
	End      time.Time // validity ran out, or the release was sent
}

// empty reports a window that closed before it opened: the reply came after
// its validity, so the client never held the lock (and must not act on it).
func (g grant) empty() bool { return !g.End.After(g.Start) }

// history is the shared log the workers of one run append to.
type history struct {
	origin time.Time

	mu       sync.Mutex
	grants   []grant
	outcomes map[string]int
}

func newHistory() *history {
	return &history{origin: time.Now(), outcomes: map[string]int{}}
}

// count records one reply of kind ("granted", "held", "NOQUORUM", …).
func (h *history) count(kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outcomes[kind]++
}

// add records a grant and returns its index for release.
func (h *history) add(g grant) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grants = append(h.grants, g)
	return len(h.grants) - 1
}

// release closes grant i's window at at, unless it already closed earlier.
func (h *history) release(i int, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if at.Before(h.grants[i].End) {
		h.grants[i].End = at
	}
}

// snapshot copies the grants and outcome counts recorded so far.
func (h *history) snapshot() ([]grant, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.outcomes))
	for k, v := range h.outcomes {
		out[k] = v
	}
	return append([]grant(nil), h.grants...), out
}

// overlap is two grants of one resource whose windows intersect; First
// started no later than Second.
type overlap struct {
	First, Second grant
	By            time.Duration // length of the intersection
}

// fenceRegression is a grant whose fence is not above the fence of the grant
// of the same resource that started before it.
type fenceRegression struct {
	Prev, Next grant
}

// checkReport is the checker's verdict over one history.
type checkReport struct {
	Grants           int // grants with a non-empty window
	Empty            int // grants whose reply arrived after their validity
	Overlaps         []overlap
	FenceRegressions []fenceRegression
	MissingFences    int // grants without an integer fence, when fences are checked
	Outcomes         map[string]int
	MaxGap           time.Duration // longest time in [from, to] in which no grant started
	MaxGapFrom       time.Time
}

// check runs the checker over gs. Windows are half-open, [Start, End): a
// grant that starts the instant another ends does not overlap it. With
// fences, every grant must carry one, and per resource, in start order,
// each fence must be strictly greater than the one before. Empty windows
// take part in neither check (see grant.empty). from and to bound the run
// for the no-grant gap.
func check(gs []grant, outcomes map[string]int, from, to time.Time, fences bool) checkReport {
	r := checkReport{Outcomes: outcomes}
	byResource := map[string][]grant{}
	var starts []time.Time
	for _, g := range gs {
		if g.empty() {
			r.Empty++
			continue
		}
		r.Grants++
		byResource[g.Resource] = append(byResource[g.Resource], g)
		starts = append(starts, g.Start)
	}
	resources := make([]string, 0, len(byResource))
	for res := range byResource {
		resources = append(resources, res)
	}
	sort.Strings(resources)

	for _, res := range resources {
		list := byResource[res]
		sort.SliceStable(list, func(i, j int) bool {
			if !list[i].Start.Equal(list[j].Start) {
				return list[i].Start.Before(list[j].Start)
			}
			return list[i].End.Before(list[j].End)
		})
		// Sweep in start order keeping every window still open, so a long
		// grant is caught overlapping any later one, not just its neighbour.
		var open []grant
		var prevFenced *grant
		for i, g := range list {
			kept := open[:0]
			for _, o := range open {
				if o.End.After(g.Start) {
					kept = append(kept, o)
				}
			}
			open = kept
			for _, o := range open {
				end := o.End
				if g.End.Before(end) {
					end = g.End
				}
				r.Overlaps = append(r.Overlaps, overlap{First: o, Second: g, By: end.Sub(g.Start)})
			}
			open = append(open, g)

			if !fences {
				continue
			}
			if !g.HasFence {
				r.MissingFences++
				continue
			}
			if prevFenced != nil && g.Fence <= prevFenced.Fence {
				r.FenceRegressions = append(r.FenceRegressions, fenceRegression{Prev: *prevFenced, Next: g})
			}
			prevFenced = &list[i]
		}
	}

	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	last := from
	for _, s := range append(starts, to) {
		if s.Before(last) {
			continue
		}
		if gap := s.Sub(last); gap > r.MaxGap {
			r.MaxGap, r.MaxGapFrom = gap, last
		}
		last = s
	}
	return r
}

// failures counts what makes a run unsafe.
func (r checkReport) failures() int {
	return len(r.Overlaps) + len(r.FenceRegressions) + r.MissingFences
}

// summary is the report on one line, times relative to origin.
func (r checkReport) summary(origin time.Time) string {
	granted := r.Grants + r.Empty
	var other []string
	keys := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "granted" || k == "held" || k == "NOQUORUM" {
			continue
		}
		other = append(other, fmt.Sprintf("%s=%d", k, r.Outcomes[k]))
	}
	return fmt.Sprintf("grants=%d (expired on arrival %d) overlaps=%d fence-regressions=%d missing-fences=%d held=%d NOQUORUM=%d max-gap=%v at %s other=[%s]",
		granted, r.Empty, len(r.Overlaps), len(r.FenceRegressions), r.MissingFences,
		r.Outcomes["held"], r.Outcomes["NOQUORUM"], r.MaxGap.Round(time.Millisecond), offset(origin, r.MaxGapFrom), strings.Join(other, " "))
}

// details describes up to limit overlaps and fence regressions.
func (r checkReport) details(origin time.Time, limit int) []string {
	var out []string
	for i, o := range r.Overlaps {
		if i == limit {
			out = append(out, fmt.Sprintf("… and %d more overlaps", len(r.Overlaps)-limit))
			break
		}
		out = append(out, fmt.Sprintf("overlap of %v on %q: %s and %s", o.By.Round(time.Millisecond), o.First.Resource, describe(origin, o.First), describe(origin, o.Second)))
	}
	for i, f := range r.FenceRegressions {
		if i == limit {
			out = append(out, fmt.Sprintf("… and %d more fence regressions", len(r.FenceRegressions)-limit))
			break
		}
		out = append(out, fmt.Sprintf("fence regression on %q: %s then %s", f.Prev.Resource, describe(origin, f.Prev), describe(origin, f.Next)))
	}
	return out
}

// describe is one grant in a message.
func describe(origin time.Time, g grant) string {
	fence := "-"
	if g.HasFence {
		fence = fmt.Sprint(g.Fence)
	}
	return fmt.Sprintf("worker %d fence %s [%s, %s)", g.Worker, fence, offset(origin, g.Start), offset(origin, g.End))
}

// offset is t relative to origin, in seconds with millisecond precision.
func offset(origin, t time.Time) string {
	return fmt.Sprintf("+%.3fs", t.Sub(origin).Seconds())
}

// ---------------------------------------------------------------------------
// the checker's own tests, on synthetic histories

// synth builds grants on one time line: ms offsets from base.
type synth struct{ base time.Time }

func (s synth) at(ms int) time.Time { return s.base.Add(time.Duration(ms) * time.Millisecond) }

func (s synth) g(res string, worker int, fence int64, start, end int) grant {
	return grant{Resource: res, Worker: worker, Fence: fence, HasFence: fence != 0,
		Sent: s.at(start - 1), Start: s.at(start), End: s.at(end)}
}

func TestCheckerSynthetic(t *testing.T) {
	t.Parallel()
	s := synth{base: time.Now()}
	from, to := s.at(0), s.at(1000)

	cases := []struct {
		name        string
		grants      []grant
		fences      bool
		overlaps    [][2]int // worker pairs (first, second)
		regressions [][2]int // worker pairs (prev, next)
		missing     int
		empty       int
		maxGap      time.Duration
	}{
		{
			name: "sequential, back to back, fences rising",
			grants: []grant{
				s.g("a", 1, 10, 0, 100), s.g("a", 2, 11, 100, 200), s.g("a", 3, 15, 250, 300),
				s.g("b", 4, 1, 50, 400), s.g("b", 5, 2, 400, 500),
			},
			fences: true,
			maxGap: 600 * time.Millisecond, // from the last start (400) to the end (1000)
		},
		{
			name:     "two holders at once",
			grants:   []grant{s.g("a", 1, 10, 0, 100), s.g("a", 2, 11, 99, 200)},
			fences:   true,
			overlaps: [][2]int{{1, 2}},
			maxGap:   901 * time.Millisecond,
		},
		{
			name: "long holder overlaps a later grant past a short one",
			grants: []grant{
				s.g("a", 1, 10, 0, 650), s.g("a", 2, 11, 600, 700), s.g("a", 3, 12, 10, 20),
			},
			overlaps: [][2]int{{1, 3}, {1, 2}}, // sorted by start: 1@0, 3@10, 2@600
			maxGap:   590 * time.Millisecond,
		},
		{
			name:   "different resources at the same time are fine",
			grants: []grant{s.g("a", 1, 1, 0, 900), s.g("b", 2, 1, 0, 900), s.g("c", 3, 1, 10, 900)},
			fences: true,
			maxGap: 990 * time.Millisecond,
		},
		{
			name: "fence goes down",
			grants: []grant{
				s.g("a", 1, 10, 0, 100), s.g("a", 2, 9, 200, 300), s.g("a", 3, 12, 400, 500),
			},
			fences:      true,
			regressions: [][2]int{{1, 2}},
			maxGap:      600 * time.Millisecond,
		},
		{
			name:        "fence repeats",
			grants:      []grant{s.g("a", 1, 7, 0, 100), s.g("a", 2, 7, 100, 200)},
			fences:      true,
			regressions: [][2]int{{1, 2}},
			maxGap:      900 * time.Millisecond,
		},
		{
			name:   "fences not checked (client-side Redlock)",
			grants: []grant{s.g("a", 1, 0, 0, 100), s.g("a", 2, 0, 200, 300)},
			maxGap: 800 * time.Millisecond,
		},
		{
			name:    "fence missing",
			grants:  []grant{s.g("a", 1, 5, 0, 100), s.g("a", 2, 0, 200, 300), s.g("a", 3, 6, 400, 500)},
			fences:  true,
			missing: 1,
			maxGap:  600 * time.Millisecond,
		},
		{
			name: "a window that closed before it opened is not a hold",
			grants: []grant{
				s.g("a", 1, 10, 0, 300),
				s.g("a", 2, 9, 100, 90), // reply after its validity: never held
			},
			fences: true,
			empty:  1,
			maxGap: 1000 * time.Millisecond,
		},
		{
			name:   "no grants at all",
			maxGap: 1000 * time.Millisecond,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := check(tc.grants, map[string]int{}, from, to, tc.fences)
			t.Log(r.summary(s.base))
			for _, d := range r.details(s.base, 10) {
				t.Log(d)
			}
			var gotOverlaps, gotRegressions [][2]int
			for _, o := range r.Overlaps {
				gotOverlaps = append(gotOverlaps, [2]int{o.First.Worker, o.Second.Worker})
			}
			for _, f := range r.FenceRegressions {
				gotRegressions = append(gotRegressions, [2]int{f.Prev.Worker, f.Next.Worker})
			}
			if fmt.Sprint(gotOverlaps) != fmt.Sprint(tc.overlaps) {
				t.Errorf("overlaps = %v, want %v", gotOverlaps, tc.overlaps)
			}
			if fmt.Sprint(gotRegressions) != fmt.Sprint(tc.regressions) {
				t.Errorf("fence regressions = %v, want %v", gotRegressions, tc.regressions)
			}
			if r.MissingFences != tc.missing {
				t.Errorf("missing fences = %d, want %d", r.MissingFences, tc.missing)
			}
			if r.Empty != tc.empty {
				t.Errorf("empty windows = %d, want %d", r.Empty, tc.empty)
			}
			if r.MaxGap != tc.maxGap {
				t.Errorf("max gap = %v, want %v", r.MaxGap, tc.maxGap)
			}
			wantFail := len(tc.overlaps)+len(tc.regressions)+tc.missing > 0
			if (r.failures() > 0) != wantFail {
				t.Errorf("failures = %d, want failing %v", r.failures(), wantFail)
			}
		})
	}

	t.Run("overlap length", func(t *testing.T) {
		r := check([]grant{s.g("a", 1, 1, 0, 300), s.g("a", 2, 2, 100, 200)}, nil, from, to, true)
		if len(r.Overlaps) != 1 || r.Overlaps[0].By != 100*time.Millisecond {
			t.Fatalf("overlaps = %+v, want one of 100ms", r.Overlaps)
		}
	})

	t.Run("history release only shortens a window", func(t *testing.T) {
		h := newHistory()
		i := h.add(s.g("a", 1, 1, 0, 300))
		h.release(i, s.at(400)) // after validity: the window stays at 300
		j := h.add(s.g("a", 2, 2, 300, 600))
		h.release(j, s.at(350))
		h.count("granted")
		h.count("granted")
		gs, outcomes := h.snapshot()
		if !gs[0].End.Equal(s.at(300)) || !gs[1].End.Equal(s.at(350)) {
			t.Fatalf("ends = %s, %s; want +300ms, +350ms", offset(s.base, gs[0].End), offset(s.base, gs[1].End))
		}
		if outcomes["granted"] != 2 {
			t.Fatalf("outcomes = %v", outcomes)
		}
		if r := check(gs, outcomes, from, to, true); r.failures() != 0 {
			t.Fatalf("back-to-back grants after release: %v", r.details(s.base, 10))
		}
	})
}
