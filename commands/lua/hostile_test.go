package lua

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Hostile scripts: each analysis ends quickly, allocates a bounded amount,
// and the script is refused (or, where it would only fail fast on Redis,
// not recognised).
func TestHostileInputsAreBounded(t *testing.T) {
	deep := func(open, close string, n int) string {
		return "return " + strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	doubling := "local s = 'x'\n" + strings.Repeat("s = s .. s\n", 40) + "return #s"
	cases := []struct {
		name, src string
		refused   bool   // else: may run by vote, but is not recognised
		reason    string // part of the refusal
	}{
		{"endless while", "while true do end", true, "a while loop has no bound"},
		{"loop on a counter", "local i = 0\nwhile i >= 0 do i = i + 1 end\nreturn i", true, "a while loop has no bound"},
		{"loop over GET", "local i = 0\nwhile i >= 0 do\n  redis.call('get', KEYS[1])\n  i = i + 1\nend", true, "a while loop has no bound"},
		{"pcall swallowing the budget", "local i = 0\nwhile i >= 0 do\n  pcall(function() local j = 0 while j >= 0 do j = j + 1 end end)\n  i = i + 1\nend", true, "a while loop has no bound"},
		{"tail recursion", "local function f(n) return f(n + 1) end\nreturn f(1)", true, "may call itself"},
		{"deep recursion", "local function f(n) return 1 + f(n + 1) end\nreturn f(1)", true, "may call itself"},
		{"string.rep bomb", "return string.rep('x', 1e9)", true, "MiB of strings"},
		{"string.rep on a method", "return ('xy'):rep(2^40)", true, "more than 8 MiB"},
		{"string.rep on a method of a table with a rep", "local t = {rep = string.rep}\nreturn ('xy'):rep(2^40)", true, "a string's own rep"},
		{"concatenation doubling, unrolled", doubling, true, "MiB of strings"},
		{"concatenation doubling in a loop", "local s = 'x'\nfor i = 1, 64 do s = s .. s end\nreturn #s", true, "MiB of strings"},
		{"table.concat doubling", "local t = {'x'}\nfor i = 1, 64 do t[1] = table.concat({t[1], t[1]}) end\nreturn #t[1]", true, "MiB of strings"},
		{"format width", "return string.format('%0999999d%0999999d%0999999d%0999999d%0999999d%0999999d%0999999d%0999999d%0999999d', 1,2,3,4,5,6,7,8,9)", false, ""}, // Lua 5.1: invalid format (width or precision too long)
		{"format items", "local t = {}\nfor i = 1, 30000 do t[i] = 1e300 end\nreturn string.format(string.rep('%99.99f', 30000), unpack(t))", true, "Lua instructions"},
		{"quadratic gsub", "local s = string.rep('a', 200000)\nreturn (string.gsub(s, 'a', 'b'))", true, "Lua instructions"},
		{"backtracking pattern", "local s = string.rep('a', 4000)\nreturn string.find(s, '.-.-.-.-b')", true, "Lua instructions"},
		{"a pattern of megabytes", "local p = string.rep('ab', 2^21)\nreturn string.find('abc', p)", true, "Lua instructions"}, // compiled on each call, in one step the time limit cannot stop
		{"slow format", "local s = ''\nfor i = 1, 100000 do s = string.format('%099d', i) end\nreturn s", true, "Lua instructions"},
		{"table growth", "local t = {}\nfor i = 1, 1e9 do t[i] = {i} end\nreturn #t", true, "more than 1000000 times in all"},
		{"unpack of a billion", "return unpack({}, 1, 1e9)", true, "Lua instructions"},
		{"nested parentheses", deep("(", ")", 100000), true, "200 levels"},
		{"nested tables", deep("{", "}", 100000), true, "200 levels"},
		{"nested calls", "return " + strings.Repeat("f(", 100000) + strings.Repeat(")", 100000), true, "200 levels"},
		{"unary chain", "return " + strings.Repeat("not ", 100000) + "true", true, "200 levels"},
		{"concatenation chain", "return " + strings.Repeat("'a' .. ", 50000) + "'a'", true, "200 levels"},
		{"nested blocks", strings.Repeat("if true then ", 20000) + strings.Repeat("end ", 20000), true, "200 levels"},
		{"addition chain", "return " + strings.Repeat("1 + ", 100000) + "1", true, "200 levels"},
		{"field chain", "return KEYS" + strings.Repeat(".x", 100000), true, "200 levels"},
		{"too long", "return 1 --" + strings.Repeat("x", MaxSource), true, "longer than"},
	}
	limit := 3 * time.Second
	if raceEnabled {
		limit = 20 * time.Second
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			a := Analyze([]byte(c.src))
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if took > limit {
				t.Errorf("analysis took %v", took)
			}
			if mb := (after.TotalAlloc - before.TotalAlloc) >> 20; mb > 256 {
				t.Errorf("analysis allocated %d MiB", mb)
			}
			if a.Meaning != nil {
				t.Fatalf("recognised as %v", a.Meaning)
			}
			if !c.refused {
				t.Logf("not refused (%v); not recognised: %s", a.Problem, a.NotRecognised)
				return
			}
			reason := c.reason
			if reason == "Lua instructions" && a.Problem != nil && strings.Contains(a.Problem.Reason, "analysis time limit") {
				// On a loaded machine (-race, 2 cores) the analysis's two
				// seconds may run out before a probe's instruction budget:
				// the same refusal, "it could block every backend".
				reason = "analysis time limit"
			}
			if a.Problem == nil || a.Vote != nil || !strings.Contains(a.Problem.Reason, reason) {
				t.Fatalf("problem %v, vote %+v; want a refusal with %q", a.Problem, a.Vote, c.reason)
			}
			t.Logf("%v in %v", a.Problem, took)
		})
	}
}

// TestPatternRepeats: the items of a Lua pattern that patternCost counts.
// '-' (like '*', '+', '?') quantifies only a single-character class;
// after '(', ')', another quantifier or at the start it is a character.
// An item the rest can follow from one length only counts once with the
// others like it.
func TestPatternRepeats(t *testing.T) {
	for pat, want := range map[string]int{
		"(%d+)-(%d+)-(%d+)":       1,
		"^%x+-%x+-%x+-%x+-%x+$":   1,
		"-?%d+":                   2, // '-?' may stop where %d starts
		"[a-z]+":                  1,
		"%b()%b[]":                1,
		"(%a+)%1":                 2, // a back-reference compares up to n bytes
		"a*a*a*c":                 3,
		".-.-.-.-b":               4,
		"(.-)-(.-)-(.-)-c":        3, // '.' matches '-'
		"a*a*a*a*a*a*a*a*a*a*a*b": 11,
		"%s*(%S+)%s*":             3,
		"%d+%-?%d+":               3,
		"a?b":                     0,
		"a?a":                     1,
		"$+$+$":                   2,
		"[a-y]+z[a-y]+z":          1,
		"[a-z]+z[a-z]+z":          2,
		"[^%d]+1[^%d]+1":          1,
		"%l+A%l+A":                1,
		"%W+a%W+a":                1,
		"%u+A%u+A":                2,
	} {
		if got := patternRepeats(pat); got != want {
			t.Errorf("patternRepeats(%q) = %d, want %d", pat, got, want)
		}
	}
}
