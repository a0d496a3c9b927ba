package lua

import (
	"reflect"
	"testing"
)

// TestUnorderedSorted: an unordered reply used any way (sorted, indexed,
// walked, reassigned, returned from a function) runs by vote: the wrapper
// on each backend sorts it before the script sees it (Script.Enforced in
// redlock/script), so its order no longer steers the script differently
// on each backend.
func TestUnorderedSorted(t *testing.T) {
	for _, src := range []string{
		"local m = redis.call('HKEYS', KEYS[1]) table.sort(m) return m",
		"local m = redis.call('SMEMBERS', KEYS[1]) m = redis.call('LRANGE', KEYS[1], 0, -1) return m",
		"local function f() return redis.call('SMEMBERS', KEYS[1]) end return f()",
		"local out = {} for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do out[#out+1] = m end return out",
		"return #redis.call('SMEMBERS', KEYS[1])",
		"return redis.call('HGETALL', KEYS[1])[1]",
		"local h = redis.call('HGETALL', KEYS[1]) redis.call('SET', KEYS[2], h[1]) return h",
		"local h = redis.call('HKEYS', KEYS[1]) return h, h[1]",
		"local m = redis.call('SMEMBERS', KEYS[1])\nredis.call('SREM', KEYS[1], m[1])",
		"local m = redis.call('SINTER', KEYS[1], KEYS[2])\nreturn m[1]",
		"local m = redis.call('HVALS', KEYS[1])\nreturn m[1]",
	} {
		if a := Analyze([]byte(src)); a.Vote == nil {
			t.Errorf("%s: refused: %v", src, a.Problem)
		}
	}
}

func TestReplyShape(t *testing.T) {
	set, pairs := ReplyShape{Order: AnyOrder}, ReplyShape{Order: PairsAnyOrder}
	for _, tc := range []struct {
		src  string
		want ReplyShape
	}{
		{"return redis.call('SMEMBERS', KEYS[1])", set},
		{"local h = redis.call('HGETALL', KEYS[1]) return h", pairs},
		{"return redis.pcall('hgetall', KEYS[1])", pairs},
		{"if redis.call('EXISTS', KEYS[1]) == 0 then return {} end return redis.call('SUNION', KEYS[1], KEYS[2])", set},
		{"if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end return redis.call('HVALS', KEYS[1])", set},
		{"return {redis.call('GET', KEYS[1]), redis.call('SINTER', KEYS[2])}", ReplyShape{Elems: []ReplyShape{{}, set}}},
		{"return {redis.call('HGETALL', KEYS[1]), {redis.call('SDIFF', KEYS[1])}}", ReplyShape{Elems: []ReplyShape{pairs, {Elems: []ReplyShape{set}}}}},
		// Ordered, or not followed: compared in order.
		{"return redis.call('LRANGE', KEYS[1], 0, -1)", ReplyShape{}},
		{"return redis.call('ZRANGE', KEYS[1], 0, -1)", ReplyShape{}},
		{"if ARGV[1] == 'a' then return redis.call('SMEMBERS', KEYS[1]) end return redis.call('LRANGE', KEYS[1], 0, -1)", ReplyShape{}},
		{"local out = {} if ARGV[1] == 'a' then return redis.call('SMEMBERS', KEYS[1]) end for _, m in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do out[#out+1] = m end return out", ReplyShape{}},
	} {
		a := Analyze([]byte(tc.src))
		if a.Vote == nil {
			t.Errorf("%s: refused: %v", tc.src, a.Problem)
			continue
		}
		if !reflect.DeepEqual(a.Vote.Reply, tc.want) {
			t.Errorf("%s: shape %+v, want %+v", tc.src, a.Vote.Reply, tc.want)
		}
	}
}
