package script

import (
	"strings"
	"testing"
	"time"

	"github.com/yuin/gopher-lua/parse"
)

// testEnforcement allows GET, SET and HKEYS (sorted).
var testEnforcement = NewEnforcement(Enforcement{Commands: []Command{
	{Name: "GET", First: 1, Last: 1, Step: 1}, {Name: "SET", First: 1, Last: 1, Step: 1, Write: true},
	{Name: "HSET", First: 1, Last: 1, Step: 1, Write: true}, {Name: "HKEYS", First: 1, Last: 1, Step: 1, Sorted: true},
}, MaxValue: 64, MaxString: 1024, WriteKeys: 3, WriteBytes: 1 << 10})

// TestEnforcedSource: an enforced wrapper keeps the body on its first
// line (after a shebang), printed again (enforce_body.go: its strings
// escaped, so that no placeholder is replaced in it), gives the body its shadows as
// parameters, and takes the patterns off ARGV (EnforceArgs: the patterns,
// then their count).
func TestEnforcedSource(t *testing.T) {
	s := New("#!lua\nreturn '%[5]s @MAXV@'").Enforced(testEnforcement)
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

func TestEnforcedBodyRefused(t *testing.T) {
	if _, err := enforcedBody("goto x ::x::"); err == nil {
		t.Fatal("goto printed")
	}
	if got := enforcedBodyOrError("return (1"); !strings.Contains(got, "cannot run this script") {
		t.Fatalf("a body that does not parse: %s", got)
	}
	// A declaration would shadow what the printed body calls (a .. b is
	// __rp_cat(a, b)): each form of declaring a name is refused.
	for _, body := range []string{
		"local __rp_cat = 5 return 'a' .. ARGV[1]",
		"local function __rp_ix() end",
		"local f = function(__rp_mc) end",
		"for __rp_f = 1, 2 do end",
		"for __rp_s in pairs(KEYS) do end",
		"function __rp_cat() end",
	} {
		if _, err := enforcedBody(body); err == nil || !strings.Contains(err.Error(), "begin with __rp_") {
			t.Errorf("%s: printed (%v)", body, err)
		}
	}
}

// FuzzEnforcedBody: a body that parses prints to one that parses, and
// printing that again changes nothing.
//
//	go test -run '^$' -fuzz FuzzEnforcedBody -fuzztime 30s ./redlock/script
func FuzzEnforcedBody(f *testing.F) {
	for _, s := range []string{
		"return redis.call('GET', KEYS[1]) .. ':' .. #ARGV",
		"local function f(a, ...) return a and f(nil, ...) or {...} end return f(1, 2)",
		"local t = {x = 1, [2] = 'b', 'c'; f()} t.x, t[1] = - -t.x, t:rep(2) return (t.y)",
		"for i = 10, 1, -1 do if i % 2 == 0 then break elseif i > 3 then local s = ('x'):rep(i) end end",
		"while true do repeat local x = 1 until x end end return not 1 == 2 ^ -3",
		"function a.b.c:d(x) return self[x] end local s = [==[\nlong]==] return s:format(...)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if _, err := parse.Parse(strings.NewReader(src), "src"); err != nil {
			return
		}
		out, err := enforcedBody(src)
		if err != nil {
			if strings.Contains(err.Error(), "goto") {
				return
			}
			t.Fatalf("%q: %v", src, err)
		}
		again, err := enforcedBody(out)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", src, out, err)
		}
		if again != out {
			t.Fatalf("%q printed as %q, then as %q", src, out, again)
		}
	})
}
