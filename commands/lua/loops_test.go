package lua

import (
	"strings"
	"testing"
)

// TestUnboundedLoopsRefused: Redis never stops a script by itself, so a
// script by vote that loops without end holds every backend (all answer
// BUSY, and no lock gets a quorum) until SCRIPT KILL on each. Every loop
// without a bound the analysis can see is refused up front.
func TestUnboundedLoopsRefused(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		reason    string
	}{
		// The runaway of the issue: it calls a hash command, so it is never
		// tried during analysis.
		{"while on HLEN", "local i=0 while redis.call('hlen',KEYS[1])>=0 do i=i+1 end return i", 1, "a while loop has no bound"},
		{"while with a counter", "local i = 0\nwhile i < 10 do\n  redis.call('hincrby', KEYS[1], 'n', 1)\n  i = i + 1\nend", 2, "a while loop has no bound"},
		{"repeat", "local n = 0\nrepeat\n  n = redis.call('lpush', KEYS[1], 'x')\nuntil n > 10", 2, "a repeat loop has no bound"},
		{"limit from data", "for i = 1, redis.call('get', KEYS[1]) do\n  redis.call('lpush', KEYS[2], i)\nend", 1, "start or limit has no bound"},
		{"limit multiplied", "for i = 1, tonumber(ARGV[1]) * 1000 do\n  redis.call('lpush', KEYS[1], i)\nend", 1, "start or limit has no bound"},
		{"limit counted up in a loop", "local n = 0\nfor _, k in ipairs(KEYS) do n = n + 1 end\nfor i = 1, n do redis.call('lpush', KEYS[1], i) end", 3, "start or limit has no bound"},
		{"zero step", "for i = 1, 10, 0 do redis.call('lpush', KEYS[1], i) end", 1, "step is not a non-zero number literal"},
		{"step from ARGV", "for i = 1, 10, ARGV[1] do redis.call('lpush', KEYS[1], i) end", 1, "step is not a non-zero number literal"},
		{"a trillion turns", "for i = 1, 1e12 do redis.call('hincrby', KEYS[1], 'n', 1) end", 1, "more than 1000000 times in all"},
		{"tiny step", "for x = 0, 100, 1e-6 do redis.call('hincrby', KEYS[1], 'n', 1) end", 1, "more than 1000000 times in all"},
		{"own iterator", "for x in function() return 1 end do\n  redis.call('hincrby', KEYS[1], 'n', 1)\nend", 1, "iterator is not ipairs"},
		{"ipairs over a growing table", "local t = {KEYS[1]}\nfor _, k in ipairs(t) do t[#t + 1] = k end", 2, "adds to the table it walks"},
		{"table.insert into the walked table", "local t = {1}\nfor _, v in ipairs(t) do\n  table.insert(t, v)\nend", 2, "adds to the table it walks"},
		{"own gmatch of a table", "local t = {gmatch = function() return function() return 1 end end}\nfor x in t:gmatch() do end", 2, "iterator is not ipairs"},
		{"parameter of a function called from anywhere", "local function f(n)\n  for i = 1, n do redis.call('incr', KEYS[1]) end\nend\nf(#KEYS)\nreturn pcall(f, redis.call('get', KEYS[1]))", 2, "start or limit has no bound"},
		{"recursion", "local function f(n)\n  redis.call('hincrby', KEYS[1], 'n', 1)\n  return f(n + 1)\nend\nreturn f(1)", 3, "may call itself"},
		{"mutual recursion", "local g\nlocal function f(n) return g(n) end\ng = function(n) return f(n) end\nreturn f(1)", 2, "may call itself"},
		{"recursion through a table field", "local t = {}\nt.f = function(n) return t.f(n) end\nreturn t.f(1)", 2, "may call itself"},
		{"recursion through pcall", "local function f(n) return pcall(f, n) end\nreturn f(1)", 1, "may call itself"},
		{"recursion through a metatable set through a local", "local set = setmetatable\nlocal t = set({}, {__index = function(t, k) return t[k] end})\nreturn t.x", 2, "may call itself"},
		{"recursion through a metatable", "local t = setmetatable({}, {__index = function(t, k) return t[k] end})\nreturn t.x", 1, "may call itself"},
		{"recursion through a method stored by name", "local t = {}\nfunction t:upper() return table.sort({2, 1}, function() return ('x'):upper() end) end\nreturn t:upper()", 2, "may call itself"},
		{"recursion through a method under a computed key", "local t = {}\nt[ARGV[1]] = function(s) return s:upper() end\nreturn string.gsub('ab', '%a', t[ARGV[1]])", 2, "may call itself"},
		{"recursion through a parameter pcall calls", "local function g(h) pcall(h, h) end\ng(g)", 1, "may call itself"},
		{"recursion through a parameter gsub calls", "local function g(s, h) return string.gsub(s, '.', h) end\nreturn g('ab', function(c) return g(c, tostring) end)", 1, "may call itself"},
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

// TestBoundedLoopsRunByVote: the loops lock and semaphore libraries write
// keep running by vote.
func TestBoundedLoopsRunByVote(t *testing.T) {
	for name, src := range map[string]string{
		"over KEYS":                               "for i, k in ipairs(KEYS) do redis.call('hset', k, ARGV[1], 1) end",
		"over #KEYS":                              "for i = 1, #KEYS do redis.call('hset', KEYS[i], ARGV[1], 1) end",
		"backwards over ARGV":                     "for i = #ARGV, 1, -1 do redis.call('rpush', KEYS[1], ARGV[i]) end",
		"nested":                                  "for i = 1, #KEYS do\n  for j = i, #KEYS do redis.call('sadd', KEYS[i], j) end\nend",
		"permits from ARGV":                       "local permits = tonumber(ARGV[2])\nlocal args = {}\nfor i = 0, permits - 1 do\n  table.insert(args, ARGV[1])\n  table.insert(args, ARGV[3] .. '_' .. i)\nend\nreturn redis.call('zadd', KEYS[1], unpack(args))",
		"floor of an ARGV":                        "for i = 1, math.floor(ARGV[1]) + 1 do end",
		"literal range":                           "local s = 0\nfor i = 1, 1000, 2 do s = s + i end\nreturn redis.call('set', KEYS[1], s)",
		"pairs over a reply":                      "local r = redis.call('hmget', KEYS[1], 'a', 'b')\nlocal n = 0\nfor _, v in pairs(r) do if v then n = n + 1 end end\nreturn n",
		"next":                                    "local t = {a = 1}\nfor k, v in next, t do redis.call('hset', KEYS[1], k, v) end",
		"gmatch":                                  "for w in string.gmatch(ARGV[1], '%a+') do redis.call('sadd', KEYS[1], w) end",
		"gmatch by string.gmatch":                 "for w in string.gmatch(ARGV[1], '%a+') do redis.call('sadd', KEYS[1], w) end",
		"helpers calling down":                    "local function one(k) return redis.call('incr', k) end\nlocal function all() for _, k in ipairs(KEYS) do one(k) end end\nall()\nreturn pcall(function() return one(KEYS[1]) end)",
		"pairs updating its own fields":           "local t = redis.call('hmget', KEYS[1], 'a', 'b')\nfor k, v in pairs(t) do t[k] = v or 0 end\nfor i, v in ipairs(t) do t[i] = v + 1 end\nreturn t",
		"parameter of a local function":           "local function f(n)\n  for i = 1, n do redis.call('incr', KEYS[1]) end\nend\nf(#KEYS)\nf(3)",
		"ipairs writing others":                   "local out = {}\nfor i, k in ipairs(KEYS) do out[i] = redis.call('get', k) end\nreturn out",
		"string methods in a comparison":          "local t = redis.call('smembers', KEYS[1])\ntable.sort(t, function(a, b) return a:lower() < b:lower() end)\nreturn t",
		"string methods in gsub's function":       "return (string.gsub(ARGV[1], '%w+', function(w) return w:upper() end))",
		"string methods under pcall":              "local ok, e = pcall(function() return ARGV[1]:sub(1, 2) end)\nreturn e",
		"string methods that the analysis models": "local n = 0\nfor w in ARGV[1]:gmatch('%a+') do n = n + #w:rep(2) end\nlocal a, b = ARGV[1]:find('l', 1, true)\nreturn {n, a, (ARGV[1]:gsub('l', 'L')), ARGV[1]:match('(h)')}",
		"a table with other methods":              "local t = {n = 0}\nfunction t:add() self.n = self.n + 1 end\nt:add()\nreturn pcall(function() return ARGV[1]:upper() end)",
	} {
		if a := analyze(t, src); a.Verdict() == Refused {
			t.Errorf("%s: refused: %v", name, a.Problem)
		}
	}
}

// TestLoopBoundsLinear: a local assigned from itself many times is worked
// out once, not once per path.
func TestLoopBoundsLinear(t *testing.T) {
	src := "local a = 1\n" + strings.Repeat("a = a + a\n", 2000) + "for i = 1, a do redis.call('incr', KEYS[1]) end"
	a := analyze(t, src)
	if a.Problem == nil || !strings.Contains(a.Problem.Reason, "start or limit has no bound") {
		t.Fatalf("problem %v, want the loop refused", a.Problem)
	}
}

// TestLoopArgvChecked: an ARGV number that bounds a loop is checked on
// every run: a plain number of at most a million (Lua's tonumber also reads
// inf, nan and hexadecimal fractions, which bound nothing).
func TestLoopArgvChecked(t *testing.T) {
	a := analyze(t, "redis.call('del', KEYS[1])\nfor i = 1, tonumber(ARGV[1]) do\n  redis.call('hincrby', KEYS[1], 'n', 1)\nend")
	if a.Verdict() != ByVote {
		t.Fatalf("verdict %v (%v), want by vote", a.Verdict(), a.Problem)
	}
	for arg, ok := range map[string]bool{"10": true, " 10 ": true, "0x10": true, "-5": true, "9e5": true, "2.5": true,
		"1e9": false, "1000001": false, "inf": false, "nan": false, "0x1p40": false, "": false, "ten": false, "-1e7": false} {
		p := a.Vote.CheckRun(1, []string{arg})
		if ok && p != nil {
			t.Errorf("ARGV[1] = %q refused: %v", arg, p)
		}
		if !ok && (p == nil || p.Line != 2 || !strings.Contains(p.Reason, "bounds a loop")) {
			t.Errorf("ARGV[1] = %q: %v, want refused at line 2", arg, p)
		}
	}
	// A million turns is a plain number within bounds, but with the
	// loop's own two (1 .. n counts n+2 at most) more work than a run may do.
	if p := a.Vote.CheckRun(1, []string{"1e6"}); p == nil || p.Line != 2 || !strings.Contains(p.Reason, "times in all") {
		t.Errorf("ARGV[1] = 1e6: %v, want refused for its work at line 2", p)
	}
	if p := a.Vote.CheckRun(1, nil); p != nil {
		t.Errorf("no ARGV: %v (the loop fails on the backend)", p)
	}
}

// TestWorkCounted: the turns of all loops are counted together (nested
// loops multiply, a call counts its function's turns), refused when first
// seen past a million, and counted per run when KEYS or ARGV decide.
func TestWorkCounted(t *testing.T) {
	for _, c := range []struct {
		name, src string
		line      int // 0: runs by vote
	}{
		{"nested within", "for i = 1, 500 do\n  for j = 1, 500 do redis.call('hlen', KEYS[1]) end\nend", 0},
		{"nested past", "for i = 1, 1000 do\n  for j = 1, 1000 do redis.call('hlen', KEYS[1]) end\nend", 2},
		{"nested walks of a reply", "local t = redis.call('lrange', KEYS[1], 0, -1)\nfor _, a in ipairs(t) do\n  for _, b in ipairs(t) do redis.call('hlen', KEYS[1]) end\nend", 3},
		{"function called in a loop", "local function f()\n  for i = 1, 1000 do redis.call('hlen', KEYS[1]) end\nend\nfor i = 1, 2000 do f() end", 4},
		{"function called twice", "local function f()\n  for i = 1, 1000 do redis.call('hlen', KEYS[1]) end\nend\nf() f()", 0},
		{"comparator of a sort", "local t = redis.call('lrange', KEYS[1], 0, -1)\ntable.sort(t, function(a, b)\n  for i = 1, 100 do end\n  return a < b\nend)", 2},
		{"loop over a measured reply", "local n = #redis.call('lrange', KEYS[1], 0, -1)\nfor i = 1, n do\n  for j = 1, 200 do redis.call('hlen', KEYS[1]) end\nend", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := analyze(t, c.src)
			if c.line == 0 {
				if a.Verdict() != ByVote {
					t.Fatalf("verdict %v (%v), want by vote", a.Verdict(), a.Problem)
				}
				return
			}
			if a.Verdict() != Refused || a.Problem.Line != c.line || !strings.Contains(a.Problem.Reason, "times in all") {
				t.Fatalf("verdict %v, %v; want refused for its work at line %d", a.Verdict(), a.Problem, c.line)
			}
		})
	}
	// Over #KEYS, the run's keys count.
	a := analyze(t, "for i = 1, #KEYS do\n  for j = 1, #KEYS do redis.call('hlen', KEYS[i]) end\nend")
	if a.Verdict() != ByVote {
		t.Fatalf("verdict %v (%v), want by vote", a.Verdict(), a.Problem)
	}
	if p := a.Vote.CheckRun(100, nil); p != nil {
		t.Errorf("100 keys: %v", p)
	}
	if p := a.Vote.CheckRun(2000, nil); p == nil || !strings.Contains(p.Reason, "times in all") {
		t.Errorf("2000 keys: %v, want refused for its work", p)
	}
	if a.Vote.CapsReplies {
		t.Error("a loop over KEYS caps replies")
	}
}
