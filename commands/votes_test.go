package commands

import (
	"testing"
	"time"
)

// TestVoteWholeReplies: a script's array reply is one that a quorum of
// backends gave in full, and a disagreement says so.
func TestVoteWholeReplies(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	for i, owner := range []string{"A", "A", "A", "B", "B"} {
		mrs[i].HSet("h", "owner", owner)
		ttl := 9 * time.Second
		if i == 2 {
			ttl = 300 * time.Millisecond
		}
		mrs[i].SetTTL("h", ttl)
		mrs[i].Set("s", []string{"x", "x", "y", "y", "z"}[i])
	}
	owner := "return {redis.call('HGET', KEYS[1], 'owner'), redis.call('PTTL', KEYS[1])}"
	// A holds a quorum for 300 ms, not 9 s.
	if got := do(d, c, "EVAL", owner, "1", "h"); got != "*2\r\n$1\r\nA\r\n:300\r\n" {
		t.Fatalf("owner and pttl = %q, want [A, 300]", got)
	}
	// Elements that a quorum gave only column by column: [A, y].
	mixed := "return {redis.call('HGET', KEYS[1], 'owner'), redis.call('GET', KEYS[2])}"
	if got := do(d, c, "EVAL", mixed, "2", "h", "s"); got != "-NOQUORUM backends disagree: 2 of 5 agree, need 3\r\n" {
		t.Fatalf("replies a quorum gave only column by column = %q", got)
	}
	// Too few answering keeps its own text.
	for _, mr := range mrs[:3] {
		mr.Close()
	}
	if got := do(d, c, "EVAL", owner, "1", "h"); got != "-NOQUORUM only 2 of 5 backends answered, need 3\r\n" {
		t.Fatalf("two of five answering = %q", got)
	}
}

// TestPlanBuiltKeys: a script that builds keys from its declared keys is
// a barrier in a pipeline; once analysed, one that only concatenates
// values is not.
func TestPlanBuiltKeys(t *testing.T) {
	d := &Dispatcher{index: commandIndex}
	built := "redis.call('SET', KEYS[1] .. ':x', ARGV[1]) return 1"
	value := "return redis.call('SET', KEYS[1], ARGV[1] .. ':x')"
	for _, src := range []string{built, value} {
		if got := d.Plan(args("EVAL", src, "1", "dk", "v"), false); !got.Barrier {
			t.Errorf("Plan(EVAL %q) before analysis = %+v, want a barrier", src, got)
		}
		s := d.scripts.add([]byte(src), "")
		s.analysis()
		if got := d.Plan(args("EVALSHA", s.sha, "1", "dk", "v"), false); got.Barrier != (src == built) {
			t.Errorf("Plan(EVALSHA of %q) = %+v", src, got)
		}
	}
	if got := d.Plan(args("EVALSHA", "0000000000000000000000000000000000000000", "1", "dk"), false); got.Barrier {
		t.Errorf("Plan(EVALSHA of an unknown script) = %+v, want its keys", got)
	}
}

// add remembers src, whose SHA1 is sha ("": not computed yet), and
// returns its entry.
func (c *scriptCache) add(src []byte, sha string) *cachedScript {
	return c.keep(c.lookup(src, sha))
}
