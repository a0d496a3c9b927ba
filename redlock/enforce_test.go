package redlock

import (
	"context"
	"strings"
	"testing"
	"time"
)

// testEnforcement allows GET, SET and HKEYS (sorted).
var testEnforcement = NewEnforcement(Enforcement{Commands: []ScriptCommand{
	{Name: "GET", First: 1, Last: 1, Step: 1}, {Name: "SET", First: 1, Last: 1, Step: 1, Write: true},
	{Name: "HSET", First: 1, Last: 1, Step: 1, Write: true}, {Name: "HKEYS", First: 1, Last: 1, Step: 1, Sorted: true},
}, MaxValue: 64, MaxString: 1024, WriteKeys: 3, WriteBytes: 1 << 10})

// TestEnforcedSource: an enforced wrapper keeps the body on its first
// line (after a shebang), printed again (enforce_body.go: its strings
// escaped, so that no placeholder is replaced in it), gives the body its shadows as
// parameters, and takes the patterns off ARGV (EnforceArgs: the patterns,
// then their count).
func TestEnforcedSource(t *testing.T) {
	s := NewScript("#!lua\nreturn '%[5]s @MAXV@'").Enforced(testEnforcement)
	for _, w := range []*Script{s.Guarded(), s.Clamped(3*time.Second, 2*time.Second), s.GuardedHeld(), s.ClampedHeld(3*time.Second, 2*time.Second)} {
		lines := strings.Split(w.Source(), "\n")
		if lines[0] != "#!lua" || !strings.HasSuffix(lines[1], "function(redis, "+enforceParams+"...) "+`return "\037\0915\093s \064MAXV\064"; `) {
			t.Fatalf("enforced source starts %q", lines[:2])
		}
		if !strings.Contains(w.Source(), enforcePrep) || !s.IsEnforced() {
			t.Fatalf("enforced source does not take the patterns off ARGV")
		}
	}
	if got := EnforceArgs([]string{"a:*", "b"}); strings.Join(got, ",") != "a:*,b,2" {
		t.Fatalf("EnforceArgs = %q", got)
	}
	if got := luaQuote("a\"\\\n\x00é"); got != `"a\034\092\010\000\195\169"` {
		t.Fatalf("luaQuote = %s", got)
	}
	if got := luaQuote("x.1[2"); got != `"x\0461\0912"` {
		t.Fatalf("luaQuote = %s, want three digits before a digit", got)
	}
}

// TestEnforcedVote: on miniredis backends (gopher-lua), the enforced
// wrapper refuses a key reached through pairs(KEYS)'s alias, a key built
// past the patterns, a command off the list, the write budget and a
// string.rep past its bound; it sorts HKEYS; a script sent without its
// patterns is refused.
func TestEnforcedVote(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	args := func(argv ...string) []string { return append(argv, EnforceArgs([]string{"t:1", "t:1:*"})...) }
	for _, tc := range []struct{ src, want string }{
		{"local _, k = pairs(KEYS) k[1] = 'other' return redis.call('GET', KEYS[1])", "outside its keys"},
		{"return redis.call('GET', KEYS[1] .. '1')", "outside the user's key patterns"},
		{"return redis.call('FLUSHALL')", "'flushall', which scripts by vote may not"},
		{"for i = 1, 5 do redis.call('SET', KEYS[1] .. ':' .. i, 'x') end", "wrote more than 3 keys"},
		{"return string.rep('x', 2000)", "string.rep"},
		{"return redis.call('SET', KEYS[1], string.rep('x', 100))", "max_value_bytes"},
		{"return redis.call('GET', 'redlock-proxy:x')", "reserved by redlock-proxy"},
		{"return getfenv(1).redis.call('FLUSHALL')", "getfenv or setfenv"},
		{"return _G.getfenv(0).redis.call('FLUSHALL')", "getfenv or setfenv"},
		{"return redis.call('SET', -0, 'x')", "outside its keys"},
	} {
		s := NewScript(tc.src).ForVote(Shape{}, []string{""}).Enforced(testEnforcement)
		v, err := c.r.Vote(ctx, s, []string{"t:1"}, args())
		if re, ok := v.(RedisError); err != nil || !ok || !strings.Contains(string(re), tc.want) {
			t.Errorf("%s = %v, %v; want an error naming %q", tc.src, v, err, tc.want)
		}
	}
	s := NewScript("redis.call('HSET', KEYS[1], 'c', 1, 'a', 2, 'b', 3) local k = redis.call('HKEYS', KEYS[1]) return k[1] .. k[2] .. k[3] .. #ARGV").Enforced(testEnforcement)
	if v, err := c.r.Vote(ctx, s, []string{"t:1:h"}, args("x")); err != nil || v != "abc1" {
		t.Errorf("HKEYS = %v, %v; want abc1 (sorted, ARGV without the patterns)", v, err)
	}
	if v, err := c.r.Vote(ctx, s, []string{"t:1:h"}, nil); err != nil || !strings.Contains(toString(v), "without its key patterns") {
		t.Errorf("without patterns = %v, %v; want refused", v, err)
	}
}

func toString(v any) string {
	if re, ok := v.(RedisError); ok {
		return string(re)
	}
	s, _ := v.(string)
	return s
}
