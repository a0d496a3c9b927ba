package script

import (
	"strings"
	"testing"
	"time"
)

// TestWanted: per key, what a quorum of backends' reports asks: a hold
// (for the quorum-th longest ttl wanted, -1 ranking above all), the end
// of a hold, or nothing.
func TestWanted(t *testing.T) {
	for _, c := range []struct {
		name    string
		reports []int64 // one key, one report per backend
		want    Wanted
	}{
		{"no expiry on a quorum", []int64{-1, -1, 0}, Wanted{Hold: true, TTL: noExpiry}},
		{"long ttls", []int64{600000, 599990, -2}, Wanted{Hold: true, TTL: 599990 * time.Millisecond}},
		{"none and a long ttl", []int64{-1, 600000, 0}, Wanted{Hold: true, TTL: 600000 * time.Millisecond}},
		{"bounded", []int64{-2, -2, -1}, Wanted{Bounded: true}},
		{"untouched", []int64{0, 0, 0}, Wanted{}},
		{"no quorum", []int64{-1, -2, 0}, Wanted{}},
		{"past what a Duration holds", []int64{1e16, 1e16, 0}, Wanted{Hold: true, TTL: noExpiry}},
	} {
		reports := make([][]int64, len(c.reports))
		for i, r := range c.reports {
			reports[i] = []int64{r}
		}
		c.want.Key = "k"
		if got := CombineReports([]string{"k"}, reports, nil, 2); got[0] != c.want {
			t.Errorf("%s: CombineReports(%v) = %+v, want %+v", c.name, c.reports, got[0], c.want)
		}
	}
}

// TestWantedBuilt: a key a script built and left unbounded on a quorum is
// held under its name, after the declared keys; on fewer, not.
func TestWantedBuilt(t *testing.T) {
	reports := [][]int64{{0}, {0}, {0}}
	built := []map[string]int64{{"{k}": -1, "{k}:x": 600000}, {"{k}": 600000}, nil}
	got := CombineReports([]string{"k"}, reports, built, 2)
	want := []Wanted{{Key: "k"}, {Key: "{k}", Hold: true, TTL: 600 * time.Second}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("wanted = %+v, want %+v", got, want)
	}
	_, rep, b, ok := SplitClamped([]any{[]any{int64(0), "{k}", int64(-1)}, int64(1)}, 1)
	if !ok || len(rep) != 1 || b["{k}"] != -1 {
		t.Fatalf("SplitClamped of a built key's report = %v, %v, %v", rep, b, ok)
	}
}

// redisError stands for a backend's error reply (redlock.RedisError),
// which a clamped reply carries as any other value.
type redisError string

// TestSplitClamped: a backend's reply to a clamped script splits into the
// body's reply and the report; anything else (a top-level error, a reply
// of another form) is the reply as it came, without a report.
func TestSplitClamped(t *testing.T) {
	if r, rep, _, ok := SplitClamped([]any{[]any{int64(-1), int64(0)}}, 2); !ok || r != nil || len(rep) != 2 || rep[0] != -1 {
		t.Errorf("a nil body reply: %v, %v, %v", r, rep, ok)
	}
	if r, _, _, ok := SplitClamped([]any{[]any{int64(0)}, redisError("ERR x")}, 1); !ok || r != redisError("ERR x") {
		t.Errorf("an error body reply: %v, %v", r, ok)
	}
	for _, v := range []any{redisError("OOM"), int64(1), []any{int64(1), int64(2)}, []any{[]any{"x"}, int64(1)}} {
		if r, rep, _, ok := SplitClamped(v, 1); ok || rep != nil || r == nil {
			t.Errorf("SplitClamped(%v) = %v, %v, %v; want it as it came", v, r, rep, ok)
		}
	}
}

// TestClampedSource: the body starts on the wrapper's first line (after a
// shebang line, kept first), so that errors name the client's lines, and
// the body's text is not touched (no placeholder in it is replaced); the
// clamped form is made once per bound.
func TestClampedSource(t *testing.T) {
	s := New("#!lua\nreturn '%[3]d %[5]s'")
	c := s.Clamped(3*time.Second, 2*time.Second)
	lines := strings.Split(c.Source(), "\n")
	if lines[0] != "#!lua" || !strings.HasSuffix(lines[1], "return '%[3]d %[5]s'") {
		t.Fatalf("clamped source starts %q", lines[:2])
	}
	if !strings.Contains(c.Source(), "t > 3000") || !strings.Contains(c.Source(), "PEXPIRE', k, 2000") || !strings.Contains(c.Source(), s.Hash()) {
		t.Fatalf("clamped source lacks its bounds or the body's SHA1:\n%s", c.Source())
	}
	if c.Hash() == s.Hash() || s.Clamped(3*time.Second, 2*time.Second) != c {
		t.Fatalf("the clamped form has the body's hash, or is made again")
	}
}
