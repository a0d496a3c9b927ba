package lua

import (
	"strings"
	"testing"
	"time"
)

// sourceLines counts lines as the Lua lexer does (\n, \r, \r\n, \n\r).
func sourceLines(src []byte) int {
	n := 1
	for i := 0; i < len(src); i++ {
		if c := src[i]; c == '\n' || c == '\r' {
			n++
			if i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r') && src[i+1] != c {
				i++
			}
		}
	}
	return n
}

func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{
		`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`,
		`local v = redis.call('GET', KEYS[1]) if not v or v == ARGV[1] then return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end return redis.error_reply('ERROR')`,
		`for _, k in ipairs(KEYS) do if redis.call('exists', k) == 1 then return 0 end end for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[1], 'PX', ARGV[2]) end return #KEYS`,
		`if ARGV[3] == "0" then return redis.call('pexpire', KEYS[1], ARGV[2] + redis.call('pttl', KEYS[1])) end return 0`,
		`return {redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1])}`,
		`local c = redis.call c(ARGV[4], KEYS[2], KEYS[1] .. ':' .. ARGV[1])`,
		`redis.call('KEYS', '*')`,
		"#!lua flags=no-writes\nreturn 1",
		`local s = 'x' for i = 1, 50 do s = s .. s end`,
		`while 1 do end`,
		`local function f() return f() end return f()`,
		`goto x ::x::`,
		`local n = tonumber(ARGV[1]) for i = #KEYS, n - 1, -2 do redis.call('hset', KEYS[1], i, ARGV[2]) end`,
		`local t = {} for k, v in pairs(t) do t[k] = v end for w in ARGV[1]:gmatch('%a') do t[#t + 1] = w end`,
		`local g local function f(n) return g(n) end g = function(n) return setmetatable({}, {__index = f}) end`,
		"return [==[\n]==] .. --[[ ]] 'a'",
		"((((((((((",
		"return foo", // a global nobody set, returned: the analysis panicked
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		start := time.Now()
		a := Analyze(src)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("analysis took %v", d)
		}
		if (a.Problem == nil) != (a.Vote != nil) {
			t.Fatalf("problem %v and vote %+v", a.Problem, a.Vote)
		}
		if a.Meaning != nil && a.Vote == nil {
			t.Fatalf("recognised %v but not vote-eligible", a.Meaning)
		}
		if p := a.Problem; p != nil {
			if p.Line < 1 || p.Line > sourceLines(src) {
				t.Fatalf("problem line %d outside the source's %d lines: %v", p.Line, sourceLines(src), p)
			}
			if strings.HasPrefix(p.Reason, "the analysis failed") {
				t.Fatalf("the analysis panicked: %v", p)
			}
		}
		if a.Meaning != nil && a.Meaning.Op == OpRead {
			view := func(string) KeyView { return held("x", time.Second) }
			if _, err := a.EvalRead([]string{"a", "b"}, []string{"x", "1000", "yes"}, view); err != nil {
				t.Logf("EvalRead: %v", err)
			}
		}
	})
}
