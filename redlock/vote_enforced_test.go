package redlock

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Votes of scripts wrapped by package script: the run-time check as a
// vote runs it, on miniredis and on a real Redis 7, and the values that
// package repeats from this one.

// testEnforcement allows GET, SET and HKEYS (sorted).
var testEnforcement = script.NewEnforcement(script.Enforcement{Commands: []script.Command{
	{Name: "GET", First: 1, Last: 1, Step: 1}, {Name: "SET", First: 1, Last: 1, Step: 1, Write: true},
	{Name: "HSET", First: 1, Last: 1, Step: 1, Write: true}, {Name: "HKEYS", First: 1, Last: 1, Step: 1, Sorted: true},
}, MaxValue: 64, MaxString: 1024, WriteKeys: 3, WriteBytes: 1 << 10})

// TestEnforcedVote: on miniredis backends (gopher-lua), the enforced
// wrapper refuses a key reached through pairs(KEYS)'s alias, a key built
// past the patterns, a command off the list, the write budget and a
// string.rep past its bound; it sorts HKEYS; a script sent without its
// patterns is refused.
func TestEnforcedVote(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	args := func(argv ...string) []string { return append(argv, script.EnforceArgs([]string{"t:1", "t:1:*"})...) }
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
		s := script.New(tc.src).ForVote(script.Shape{}, []string{""}).Enforced(testEnforcement)
		v, err := c.r.Vote(ctx, s, []string{"t:1"}, args())
		if re, ok := v.(RedisError); err != nil || !ok || !strings.Contains(string(re), tc.want) {
			t.Errorf("%s = %v, %v; want an error naming %q", tc.src, v, err, tc.want)
		}
	}
	s := script.New("redis.call('HSET', KEYS[1], 'c', 1, 'a', 2, 'b', 3) local k = redis.call('HKEYS', KEYS[1]) return k[1] .. k[2] .. k[3] .. #ARGV").Enforced(testEnforcement)
	if v, err := c.r.Vote(ctx, s, []string{"t:1:h"}, args("x")); err != nil || v != "abc1" {
		t.Errorf("HKEYS = %v, %v; want abc1 (sorted, ARGV without the patterns)", v, err)
	}
	loops := script.New("local n = '' for w in string.gmatch(ARGV[1], '%a+') do n = n .. w end for k, v in next, {x = 1} do n = n .. k end for _, v in ipairs({1, 2}) do n = n .. v end return n").Enforced(testEnforcement)
	if v, err := c.r.Vote(ctx, loops, []string{"t:1"}, args("a b")); err != nil || v != "abx12" {
		t.Errorf("loops over string.gmatch, next and ipairs = %v, %v; want abx12", v, err)
	}
	sorted := script.New("local k = redis.call('HKEYS', KEYS[1]) table.sort(k) table.sort(k, function(a, b) return a > b end) return k[1]").Enforced(testEnforcement)
	if v, err := c.r.Vote(ctx, sorted, []string{"t:1:h"}, args()); err != nil || v != "c" {
		t.Errorf("table.sort with and without a comparison = %v, %v; want c", v, err)
	}
	if v, err := c.r.Vote(ctx, s, []string{"t:1:h"}, nil); err != nil || !strings.Contains(toString(v), "without its key patterns") {
		t.Errorf("without patterns = %v, %v; want refused", v, err)
	}
}

// TestScriptConstants: package script repeats two values of this package,
// which it cannot import (this one imports it): ReservedPrefix, in the
// run-time check, and PTTLNoExpiry, in what a clamp wanted.
func TestScriptConstants(t *testing.T) {
	src := script.New("return 1").Enforced(testEnforcement).Guarded().Source()
	if !strings.Contains(src, `"`+ReservedPrefix+`"`) {
		t.Errorf("the run-time check does not refuse %q", ReservedPrefix)
	}
	if w := script.CombineReports([]string{"k"}, [][]int64{{-1}}, nil, 1); !w[0].Hold || w[0].TTL != PTTLNoExpiry {
		t.Errorf("a key wanted without expiry = %+v, want a hold for PTTLNoExpiry", w[0])
	}
}

func toString(v any) string {
	if re, ok := v.(RedisError); ok {
		return string(re)
	}
	s, _ := v.(string)
	return s
}

// realEnforced runs scripts by vote, enforced with e, on one throwaway
// redis-server (skipped under -short).
func realEnforced(t *testing.T, e *script.Enforcement) func(src string, argv ...string) (any, error) {
	t.Helper()
	addr := startRedis(t)
	n, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	r := New([]Node{n}, Options{NodeTimeout: testTimeout, Logger: testLogger(t)})
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return func(src string, argv ...string) (any, error) {
		s := script.New(src).ForVote(script.Shape{}, []string{""}).Enforced(e)
		return r.Vote(context.Background(), s, []string{"t:1"}, append(argv, script.EnforceArgs([]string{"t:1", "t:1:*"})...))
	}
}

// TestEnforcedStringAliases: on a real Redis 7, every way a script body
// reaches the string library, or builds a string, is bounded at run
// time (testEnforcement: 1024 bytes), whatever alias it takes: a
// string's methods picked by a computed key or kept in a local,
// getmetatable(""), a table whose __index is a string, string.format
// with many arguments, '..' doubling, gfind's pattern, cjson.encode and
// cmsgpack.pack of a table that holds one subtable many times, table.sort
// of 300,000 values (in C, unkillable);
// collectgarbage cannot stop the collector, nor a script change cjson's
// settings, which every later script shares.
func TestEnforcedStringAliases(t *testing.T) {
	run := realEnforced(t, testEnforcement)
	for _, tc := range []struct {
		src  string
		argv []string
		want string
	}{
		{"local f = ('x')[ARGV[1]] return #f('x', 4096)", []string{"rep"}, "string.rep"},
		{"local v = 'x' local f = v[ARGV[1]] return #f(v, 4096)", []string{"rep"}, "string.rep"},
		{"local s = getmetatable('').__index return #s.rep('x', 4096)", nil, "string.rep"},
		{"local s = rawget(getmetatable('x'), '__index') return #s.rep('x', 4096)", nil, "string.rep"},
		{"local mt = getmetatable('') local f = mt.__index[ARGV[1]] return #f('x', 4096)", []string{"rep"}, "string.rep"},
		{"local t = setmetatable({}, {__index = 'x'}) return #t.rep('x', 4096)", nil, "string.rep"},
		{"local a = string.rep('y', 300) local t = setmetatable({}, {__index = 'x'}) local f = t[ARGV[1]] return #f('%s%s%s%s', a, a, a, a)", []string{"format"}, "string.format"},
		{"local s = 'x' for i = 1, 12 do s = s .. s end return #s", nil, ".."},
		{"local s = 'x' for i = 1, 12 do s = s .. s .. '' end return #s", nil, ".."},
		{"local t = {} for i = 1, 100 do t[i] = string.rep('y', 100) end return #string.format(string.rep('%s', 100), unpack(t))", nil, "string.format"},
		{"local a = string.rep('y', 900) return #('%s%s'):format(a, a)", nil, "string.format"},
		{"local a = string.rep('y', 400) return #string.format('%q', a .. string.rep('\\0', 200))", nil, "string.format"},
		{"local s = string.rep('a', 90) for m in string.gfind(s, 'a*a*a*c') do end return 1", nil, "backtrack"},
		{"local s = string.rep('a', 90) return ('x')[ARGV[1]](s, 'a*a*a*c')", []string{"find"}, "backtrack"},
		{"local s = string.rep('a-', 45) return string.find(s, '(.-)-(.-)-(.-)-c')", nil, "backtrack"},
		{"collectgarbage('stop') return 1", nil, "collectgarbage"},
		{"local t = {'xxxxxxxx'} for i = 1, 12 do t = {t, t} end return #cjson.encode(t)", nil, "cjson.encode"},
		{"local t = {'xxxxxxxx'} for i = 1, 12 do t = {t, t} end return #_G['cj' .. 'son'].new().encode(t)", nil, "cjson.encode"},
		{"local t = {'xxxxxxxx'} for i = 1, 12 do t = {t, t} end return #cmsgpack.pack(t, t)", nil, "cmsgpack.pack"},
		{"cjson.encode_number_precision(1) return 1", nil, "cjson's settings"},
		{"local t = {} for i = 1, 300000 do t[i] = -i end table.sort(t) return t[1]", nil, "table.sort"},
		{"local t = {} for i = 1, 300000 do t[i] = -i end local s = _G['tab' .. 'le'] s[ARGV[1]](t) return t[1]", []string{"sort"}, "table.sort"},
	} {
		v, err := run(tc.src, tc.argv...)
		if re, ok := v.(RedisError); err != nil || !ok || !strings.Contains(string(re), tc.want) {
			t.Errorf("%s = %v, %v; want an error naming %q", tc.src, v, err, tc.want)
		}
	}
}

// TestEnforcedHeap: on a real Redis 7, a run that keeps strings past the
// heap bound (8 MiB here) is refused, though each string is within the
// string bound; one that builds as much and lets it go is not.
func TestEnforcedHeap(t *testing.T) {
	e := *testEnforcement
	e.MaxString, e.MaxHeap = 1<<20, 8<<20
	run := realEnforced(t, script.NewEnforcement(e))
	keep := "local t, s = {}, string.rep('x', 600000) for i = 1, 30 do t[i] = s .. i end return #t"
	if v, err := run(keep); err != nil || !strings.Contains(toString(v), "KiB of strings and tables") {
		t.Fatalf("keeping 30 strings of 600 kB = %v, %v; want refused past the heap bound", v, err)
	}
	drop := "local n, s = 0, string.rep('x', 600000) for i = 1, 30 do n = n + #(s .. i) end return n"
	if v, err := run(drop); err != nil || v != int64(30*600001+21) {
		t.Fatalf("building and dropping 30 strings of 600 kB = %v, %v; want them counted", v, err)
	}
}

// TestEnforcedBodySameResults: on a real Redis 7, a body printed for the
// run-time check (enforce_body.go) answers what the body as written
// answers, and a run-time error names the line the client wrote.
func TestEnforcedBodySameResults(t *testing.T) {
	addr := startRedis(t)
	n, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	r := New([]Node{n}, Options{NodeTimeout: testTimeout, Logger: testLogger(t)})
	defer r.Close(context.Background())
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: addr})
	defer cl.Close()
	for _, src := range []string{
		"local function fact(n) if n <= 1 then return 1 end return n * fact(n - 1) end return fact(10)",
		"local fact = 7 local fact = function(n) return fact end return fact(1)",
		"local function f(...) return select('#', ...), ... end local a, b, c = f(1, nil, 3) return {a, b, c}",
		"local function f() return 1, 2, 3 end return {f(), f()}",
		"local function f() return 1, 2, 3 end return {(f())}",
		"local t = {n = 1} function t.inc(x) t.n = t.n + x end function t:add(x) self.n = self.n + x end t.inc(2) t:add(3) return t.n",
		"local s = 'abc' return s:upper() .. s:rep(2) .. ('%d-%s'):format(5, 'x') .. s:sub(2) .. #s",
		"local s = 'a,b,,c' local out = {} for w in s:gmatch('[^,]+') do out[#out + 1] = w end return table.concat(out, '|')",
		`return (string.gsub('hello world', '(%w+)', function(w) return w:upper() end))`,
		"return {string.find('hello', 'l+')}",
		"local x = - -1 local y = 2 ^ 3 ^ 2 local z = -2 ^ 2 return {x, y, z, 7 % 3, 1 .. 2, 10 / 4 .. ''}",
		"local i, acc = 0, {} repeat local j = i i = i + 1 acc[#acc + 1] = j until j >= 3 return acc",
		"local acc = {} for i = 10, 1, -3 do acc[#acc + 1] = i end for k, v in ipairs({'a', 'b'}) do acc[#acc + 1] = k .. v end return acc",
		"local v = 5 if v < 3 then return 'a' elseif v < 6 then return 'b' else return 'c' end",
		"local t = {a = {b = {}}} t.a.b.c = 'deep' t['a'].b['d'] = 'er' return t.a.b.c .. t.a.b.d",
		"local s = [[long\nstring\x00with]] .. \"\\n\\\"esc\\\"\" return s",
		"local t = setmetatable({}, {__index = function(_, k) return k .. '!' end, __concat = function(a, b) return 'cat' end}) return t.x .. (t .. 'y') .. t[ARGV[1]]",
		"return redis.call('SET', KEYS[1], 'v') and redis.call('GET', KEYS[1]) .. KEYS[1]:len()",
		"return not nil == true and 1 or 2",
		"return cjson.encode({a = {1, 2}}) .. cjson.decode('[1,2]')[2] .. cjson.encode_max_depth() .. #cjson.new().encode({'x'})",
		"local t = cmsgpack.unpack(cmsgpack.pack({1, 'two'})) return t[2]",
		"local a = {}\nlocal b = nil\nreturn a.x.y",
		"local a = 1\n\nlocal b = nil .. 'x'\nreturn b",
		"local a = 1\nreturn\n  ('x'):bad()",
		"local t = {}\nt[1] = 'a'\nreturn #t, t[1]",
		// Long chains parse as Lua parses them, not nested a level an
		// operator.
		"local a = 1 return " + strings.Repeat("a + ", 300) + "a",
		"local a = 'x' return #(" + strings.Repeat("a .. ", 150) + "a)",
		"local a = {} return " + strings.Repeat("a and ", 150) + "1",
		"local t = setmetatable({}, {__concat = function(x, y) return 'M' end}) return 'a' .. 1 .. t .. 'b' .. 'c'",
		"local a = 'x'\nlocal b\nreturn a .. 'y' .. b .. 'z'",
		// '-' after ')' or a quantifier is a character, not a quantifier.
		"local y, m, d = string.match('2024-01-05 is the date', '(%d+)-(%d+)-(%d+)') return {tonumber(y), tonumber(m), tonumber(d)}",
		"return string.match('123e4567-e89b-12d3-a456-426614174000', '^%x+-%x+-%x+-%x+-%x+$') and 1 or 0",
		"redis.call('SET', KEYS[1], '2024-01-05T10:20:30.123456789+00:00') local v = redis.call('GET', KEYS[1]) return {string.match(v, '^(%d+)-(%d+)-(%d+)')}",
	} {
		s := script.New(src).ForVote(script.Shape{}, []string{""})
		want, werr := cl.Eval(ctx, src, []string{"t:1"}, "k").Result()
		got, gerr := r.Vote(ctx, s.Enforced(testEnforcement), []string{"t:1"}, append([]string{"k"}, script.EnforceArgs([]string{"t:1"})...))
		if re, ok := got.(RedisError); ok {
			got, gerr = nil, re
		}
		if werr != nil || gerr != nil {
			// An error names the same line; its text may differ.
			line := func(e error) string {
				if e == nil {
					return "<no error>"
				}
				i := strings.Index(e.Error(), "user_script:")
				if i < 0 {
					return e.Error()
				}
				return strings.SplitN(e.Error()[i:], ":", 3)[1]
			}
			if line(werr) != line(gerr) {
				t.Errorf("%q: error %v as written, %v enforced", src, werr, gerr)
			}
			continue
		}
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Errorf("%q = %v as written, %v enforced", src, want, got)
		}
	}
}

// BenchmarkKeyedWrapper is one keyed command (SADD) as the proxy sends it
// by vote, on one real redis-server, in the clamp with and without the
// run-time check: what the check costs each call.
func BenchmarkKeyedWrapper(b *testing.B) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		b.Skip("no redis-server in PATH")
	}
	port := freePort(b)
	redisOnPort(b, port)
	n, err := DialNode("127.0.0.1:" + port)
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	r := New([]Node{n}, Options{NodeTimeout: testTimeout, Logger: testLogger(b)})
	defer r.Close(context.Background())
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer cl.Close()
	s := script.New("return redis.pcall('SADD', unpack(ARGV))")
	for _, tc := range []struct {
		name string
		s    *script.Script
		args []string
	}{
		{"plain", s, []string{"bench:s", "m"}},
		{"enforced", s.Enforced(testEnforcement), append([]string{"bench:s", "m"}, script.EnforceArgs([]string{"bench:*"})...)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			w := tc.s.Clamped(time.Minute, 10*time.Second)
			ctx := context.Background()
			if err := cl.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := r.Vote(ctx, w, []string{"bench:s"}, tc.args); err != nil {
					b.Fatal(err)
				}
			}
			// The backend's own time per call, less shaken by a loaded
			// machine than the round trip.
			info, err := cl.Info(ctx, "commandstats").Result()
			if err != nil {
				b.Fatal(err)
			}
			if _, rest, ok := strings.Cut(info, "cmdstat_evalsha:"); ok {
				if _, v, ok := strings.Cut(rest, "usec_per_call="); ok {
					v, _, _ = strings.Cut(v, ",")
					if f, err := strconv.ParseFloat(v, 64); err == nil {
						b.ReportMetric(f, "backend-µs/call")
					}
				}
			}
		})
	}
}
