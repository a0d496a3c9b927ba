package lua

import (
	"strings"
	"testing"
)

// TestNondeterministicRefused: a script run by vote runs on every backend,
// so a command whose answer or effect is each backend's own (a random
// pick, an order that follows the backend's encoding and history, its
// processor time) would make the backends diverge: SPOP removes a
// different member on each, and the set answers NOQUORUM for good. Each
// is refused up front with the line and the reason.
func TestNondeterministicRefused(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		reason    string
	}{
		{"SPOP", "local m = redis.call('SPOP', KEYS[1])\nreturn m", 1, "SPOP removes a random member"},
		{"SPOP by pcall", "local ok = 1\nreturn redis.pcall('spop', KEYS[1], 2)", 2, "SPOP removes a random member"},
		{"SRANDMEMBER", "return redis.call('srandmember', KEYS[1])", 1, "SRANDMEMBER picks random members"},
		{"HRANDFIELD", "return redis.call('HRANDFIELD', KEYS[1], 1, 'WITHVALUES')", 1, "HRANDFIELD picks random fields"},
		{"ZRANDMEMBER", "return redis.call('ZRANDMEMBER', KEYS[1])", 1, "ZRANDMEMBER picks random members"},
		{"RANDOMKEY", "return redis.call('RANDOMKEY')", 1, "RANDOMKEY picks a random key"},
		{"SSCAN", "return redis.call('SSCAN', KEYS[1], 0)", 1, "SSCAN walks the set"},
		{"HSCAN", "return redis.call('HSCAN', KEYS[1], 0)", 1, "HSCAN walks the hash"},
		{"ZSCAN", "return redis.call('ZSCAN', KEYS[1], 0)", 1, "ZSCAN walks the sorted set"},
		{"os.clock", "local t0 = 1\nreturn tostring(os.clock())", 2, "os.clock reads each backend's own processor time"},
		{"os.clock aliased", "local c = os.clock\nreturn c()", 1, "os.clock"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := analyze(t, c.src)
			if a.Verdict() != Refused || a.Vote != nil {
				t.Fatalf("not refused: verdict %v, vote %+v", a.Verdict(), a.Vote)
			}
			if a.Problem.Line != c.line || !strings.Contains(a.Problem.Reason, c.reason) {
				t.Fatalf("refused with %q; want line %d and %q", a.Problem, c.line, c.reason)
			}
		})
	}
}

// TestNondeterministicFromArgvRefused: a command named by ARGV is checked
// on every run against the same list.
func TestNondeterministicFromArgvRefused(t *testing.T) {
	a := analyze(t, "redis.call('SADD', KEYS[1], 'x')\nreturn redis.call(ARGV[1], KEYS[1])")
	if a.Verdict() != ByVote {
		t.Fatalf("verdict %v (%v), want by vote", a.Verdict(), a.Problem)
	}
	for _, name := range []string{"spop", "SRANDMEMBER", "smembers", "hgetall"} {
		p := a.Vote.CheckRun(1, []string{name})
		if p == nil || p.Line != 2 || !strings.Contains(p.Reason, strings.ToUpper(name)) {
			t.Errorf("ARGV[1] = %q: %v, want refused at line 2", name, p)
		}
	}
	if p := a.Vote.CheckRun(1, []string{"scard"}); p != nil {
		t.Errorf("ARGV[1] = scard: %v", p)
	}
	for _, name := range []string{"spop", "srandmember", "hrandfield", "zrandmember", "randomkey", "smembers", "hgetall", "sscan"} {
		if Allowed(name) {
			t.Errorf("Allowed(%q)", name)
		}
	}
}

// TestDeterministicAllowed: what stays allowed, and why (docs/compatibility.md).
func TestDeterministicAllowed(t *testing.T) {
	for name, src := range map[string]string{
		// Redis reseeds its own generator identically before every script,
		// so math.random gives the same numbers on every backend.
		"math.random": "local n = math.random(1, 100)\nredis.call('SET', KEYS[1], n)\nreturn n",
		// Each backend's clock, as PEXPIRE already uses it.
		"TIME": "local t = redis.call('TIME')\nreturn redis.call('ZADD', KEYS[1], t[1], ARGV[1])",
		// Lua 5.1 iterates a table in an order fixed by what was put in it.
		"pairs over a table built in order": "local t = {}\nfor i, k in ipairs(KEYS) do t[k] = i end\nfor k, i in pairs(t) do redis.call('HSET', KEYS[1], k, i) end",
		// Ordered replies: by rank, score then member, position.
		"ordered reads": "local a = redis.call('ZRANGE', KEYS[1], 0, -1)\nlocal b = redis.call('LRANGE', KEYS[2], 0, -1)\nreturn {a, b, redis.call('HMGET', KEYS[3], 'x', 'y'), redis.call('SMISMEMBER', KEYS[4], 'x')}",
		// Stored results hold the same members whatever the order.
		"set algebra stored": "return redis.call('SINTERSTORE', KEYS[1], KEYS[2], KEYS[3])",
	} {
		if a := analyze(t, src); a.Verdict() != ByVote {
			t.Errorf("%s: verdict %v (%v), want by vote", name, a.Verdict(), a.Problem)
		}
	}
}
