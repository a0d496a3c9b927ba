package tests

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// The SET and expiry options as Redis 7 has them: each option's sequence
// of commands runs on one real redis-server and through the proxy, and the
// replies must be the same (ttls and deadlines within a tolerance).

// optStep is one command of a sequence. In args, "$" is replaced by the
// case's own prefix (so every case has its own keys), and {s+N}, {s-N},
// {ms+N}, {ms-N} by the Unix time in seconds or milliseconds now plus or
// minus N. tol > 0: integer replies may differ by that much.
type optStep struct {
	args []string
	tol  int64
}

func st(args ...string) optStep { return optStep{args: args} }

// near is a step whose integer reply is a ttl or deadline.
func near(tol int64, args ...string) optStep { return optStep{args: args, tol: tol} }

type optCase struct {
	name  string
	steps []optStep
}

func expandArg(a, prefix string) string {
	a = strings.ReplaceAll(a, "$", prefix)
	if !strings.HasPrefix(a, "{") || !strings.HasSuffix(a, "}") {
		return a
	}
	body := a[1 : len(a)-1]
	now := time.Now()
	for _, unit := range []string{"ms", "s"} {
		if !strings.HasPrefix(body, unit) {
			continue
		}
		n, err := strconv.ParseInt(body[len(unit):], 10, 64)
		if err != nil {
			return a
		}
		if unit == "s" {
			return strconv.FormatInt(now.Unix()+n, 10)
		}
		return strconv.FormatInt(now.UnixMilli()+n, 10)
	}
	return a
}

func sameReply(want, got any, tol int64) bool {
	w, ok1 := want.(int64)
	g, ok2 := got.(int64)
	if tol > 0 && ok1 && ok2 && w >= 0 && g >= 0 {
		d := w - g
		return d <= tol && d >= -tol
	}
	return reflect.DeepEqual(want, got)
}

// runOptCases runs every case on ref (one redis-server) and proxy.
func runOptCases(t *testing.T, ref, proxy *testkit.Conn, option string, cases []optCase) {
	for i, c := range cases {
		prefix := fmt.Sprintf("%s:%d:", option, i)
		for j, s := range c.steps {
			args := make([]string, len(s.args))
			for k, a := range s.args {
				args[k] = expandArg(a, prefix)
			}
			want := ref.Do(args...)
			got := proxy.Do(args...)
			if !sameReply(want, got, s.tol) {
				t.Errorf("%s, step %d %q: redis-server answered %#v, the proxy %#v", c.name, j, args, want, got)
			}
		}
	}
}

// optTables are the tables of TestSetExpireOptions, one per option.
var optTables = []struct {
	option string
	cases  []optCase
}{
	{"XX", []optCase{
		{"absent key: not written", []optStep{st("SET", "$k", "v", "XX"), st("GET", "$k"), st("EXISTS", "$k")}},
		{"other value: written", []optStep{st("SET", "$k", "v"), st("SET", "$k", "w", "XX"), st("GET", "$k"), st("PTTL", "$k")}},
		{"with PX", []optStep{st("SET", "$k", "v"), st("SET", "$k", "w", "XX", "PX", "20000"), st("GET", "$k"), near(2000, "PTTL", "$k")}},
		{"same value with PX: an extend", []optStep{st("SET", "$k", "v", "PX", "5000"), st("SET", "$k", "v", "PX", "30000", "XX"), st("GET", "$k"), near(2000, "PTTL", "$k")}},
		{"without expiry clears the ttl", []optStep{st("SET", "$k", "v", "EX", "20"), st("SET", "$k", "w", "XX"), st("PTTL", "$k")}},
		{"same value, no expiry, clears the ttl", []optStep{st("SET", "$k", "v", "EX", "20"), st("SET", "$k", "v", "XX"), st("PTTL", "$k")}},
		{"with NX: syntax error", []optStep{st("SET", "$k", "v", "XX", "NX"), st("SET", "$k", "v", "NX", "XX"), st("EXISTS", "$k")}},
		{"twice", []optStep{st("SET", "$k", "v"), st("SET", "$k", "w", "XX", "XX"), st("GET", "$k")}},
	}},
	{"KEEPTTL", []optCase{
		{"keeps the ttl", []optStep{st("SET", "$k", "v", "PX", "30000"), st("SET", "$k", "w", "KEEPTTL"), st("GET", "$k"), near(2000, "PTTL", "$k")}},
		{"no ttl stays none", []optStep{st("SET", "$k", "v"), st("SET", "$k", "w", "KEEPTTL"), st("GET", "$k"), st("PTTL", "$k")}},
		{"absent key", []optStep{st("SET", "$k", "v", "KEEPTTL"), st("GET", "$k"), st("PTTL", "$k")}},
		{"with XX", []optStep{st("SET", "$k", "v", "KEEPTTL", "XX"), st("EXISTS", "$k"), st("SET", "$k", "v", "EX", "20"), st("SET", "$k", "w", "XX", "KEEPTTL"), near(2, "TTL", "$k")}},
		{"with an expiry: syntax error", []optStep{st("SET", "$k", "v", "KEEPTTL", "PX", "100"), st("SET", "$k", "v", "EX", "10", "KEEPTTL"), st("SET", "$k", "v", "KEEPTTL", "EXAT", "{s+10}"), st("SET", "$k", "v", "PXAT", "{ms+10000}", "KEEPTTL"), st("EXISTS", "$k")}},
		{"twice", []optStep{st("SET", "$k", "v", "EX", "20"), st("SET", "$k", "w", "KEEPTTL", "KEEPTTL"), near(2, "TTL", "$k")}},
	}},
	{"GET", []optCase{
		{"absent then present", []optStep{st("SET", "$k", "v", "GET"), st("GET", "$k"), st("SET", "$k", "w", "GET"), st("GET", "$k")}},
		{"with PX", []optStep{st("SET", "$k", "v"), st("SET", "$k", "w", "GET", "PX", "30000"), near(2000, "PTTL", "$k")}},
		{"with KEEPTTL", []optStep{st("SET", "$k", "v", "PX", "30000"), st("SET", "$k", "w", "GET", "KEEPTTL"), st("GET", "$k"), near(2000, "PTTL", "$k")}},
		{"with XX", []optStep{st("SET", "$k", "v", "GET", "XX"), st("EXISTS", "$k"), st("SET", "$k", "v"), st("SET", "$k", "w", "XX", "GET"), st("GET", "$k")}},
		{"with NX", []optStep{st("SET", "$k", "v", "NX", "GET"), st("GET", "$k"), st("SET", "$k", "w", "GET", "NX"), st("GET", "$k")}},
		{"with NX and XX: syntax error", []optStep{st("SET", "$k", "v", "NX", "XX", "GET")}},
	}},
	{"EXPIRY", []optCase{
		{"EX", []optStep{st("SET", "$k", "v", "EX", "20"), near(2, "TTL", "$k")}},
		{"PX", []optStep{st("SET", "$k", "v", "PX", "20000"), near(2000, "PTTL", "$k")}},
		{"EXAT", []optStep{st("SET", "$k", "v", "EXAT", "{s+20}"), near(2, "TTL", "$k")}},
		{"PXAT", []optStep{st("SET", "$k", "v", "PXAT", "{ms+20000}"), near(2000, "PTTL", "$k")}},
		{"EXAT past: the key is gone", []optStep{st("SET", "$k", "v"), st("SET", "$k", "w", "EXAT", "{s-10}"), st("EXISTS", "$k")}},
		{"PXAT past with GET", []optStep{st("SET", "$k", "v"), st("SET", "$k", "w", "GET", "PXAT", "{ms-10000}"), st("EXISTS", "$k")}},
		{"two expiries", []optStep{st("SET", "$k", "v", "EX", "10", "PX", "10000"), st("SET", "$k", "v", "PXAT", "{ms+10000}", "EXAT", "{s+10}"), st("EXISTS", "$k")}},
		{"zero and negative", []optStep{st("SET", "$k", "v", "EX", "0"), st("SET", "$k", "v", "PX", "-5"), st("SET", "$k", "v", "EXAT", "0"), st("SET", "$k", "v", "PXAT", "-1"), st("EXISTS", "$k")}},
		{"not an integer", []optStep{st("SET", "$k", "v", "EX", "ten"), st("SET", "$k", "v", "PX", "1.5"), st("SET", "$k", "v", "EXAT", "99999999999999999999"), st("EXISTS", "$k")}},
		{"missing argument", []optStep{st("SET", "$k", "v", "EX"), st("SET", "$k", "v", "PX"), st("SET", "$k", "v", "NX", "PXAT")}},
		{"overflow", []optStep{st("SET", "$k", "v", "EX", "9223372036854775807"), st("SET", "$k", "v", "PX", "9223372036854775807"), st("EXISTS", "$k")}},
		{"unknown option", []optStep{st("SET", "$k", "v", "FOO"), st("SET", "$k", "v", "EX", "10", "BAR")}},
		{"the same option twice", []optStep{st("SET", "$k", "v", "EX", "10", "EX", "20"), near(2, "TTL", "$k"), st("SET", "$k", "w", "NX", "NX"), st("SET", "$k", "w", "GET", "GET"), st("GET", "$k")}},
	}},
	{"EXPIRE", []optCase{
		{"plain", []optStep{st("EXPIRE", "$k", "20"), st("SET", "$k", "v"), st("EXPIRE", "$k", "20"), near(2, "TTL", "$k"), st("PEXPIRE", "$k", "30000"), near(2000, "PTTL", "$k")}},
		{"NX", []optStep{st("EXPIRE", "$k", "20", "NX"), st("SET", "$k", "v"), st("EXPIRE", "$k", "20", "NX"), near(2, "TTL", "$k"), st("EXPIRE", "$k", "40", "NX"), near(2, "TTL", "$k")}},
		{"XX", []optStep{st("SET", "$k", "v"), st("PEXPIRE", "$k", "20000", "XX"), st("PTTL", "$k"), st("PEXPIRE", "$k", "20000"), st("PEXPIRE", "$k", "30000", "xx"), near(2000, "PTTL", "$k")}},
		{"GT", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "20", "GT"), st("TTL", "$k"), st("EXPIRE", "$k", "20"), st("EXPIRE", "$k", "10", "GT"), near(2, "TTL", "$k"), st("EXPIRE", "$k", "30", "GT"), near(2, "TTL", "$k")}},
		{"LT", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "30", "LT"), near(2, "TTL", "$k"), st("EXPIRE", "$k", "40", "LT"), near(2, "TTL", "$k"), st("EXPIRE", "$k", "20", "LT"), near(2, "TTL", "$k")}},
		{"XX GT", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "20", "XX", "GT"), st("EXPIRE", "$k", "20"), st("EXPIRE", "$k", "30", "GT", "XX"), near(2, "TTL", "$k")}},
		{"absent key", []optStep{st("EXPIRE", "$k", "20", "XX"), st("EXPIRE", "$k", "20", "LT"), st("EXPIRE", "$k", "20", "GT"), st("EXPIRE", "$k", "-1", "LT")}},
		{"zero or negative deletes", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "0"), st("EXISTS", "$k"), st("SET", "$k", "v"), st("PEXPIRE", "$k", "-100"), st("EXISTS", "$k")}},
		{"past with GT on no expiry: kept", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "-1", "GT"), st("EXISTS", "$k"), st("EXPIRE", "$k", "-1", "XX"), st("EXISTS", "$k")}},
		{"past with LT on no expiry: deleted", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "-1", "LT"), st("EXISTS", "$k")}},
		{"past with NX: deleted", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "0", "NX"), st("EXISTS", "$k")}},
		{"incompatible options", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "10", "NX", "XX"), st("EXPIRE", "$k", "10", "GT", "NX"), st("EXPIRE", "$k", "10", "LT", "GT"), st("PEXPIRE", "$k", "10", "NX", "LT"), st("PTTL", "$k")}},
		{"unknown option", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "10", "FOO"), st("EXPIRE", "$k", "ten", "BAR"), st("PTTL", "$k")}},
		{"not an integer", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "ten"), st("PEXPIRE", "$k", "1.5", "NX"), st("EXPIRE", "$k", "99999999999999999999"), st("PTTL", "$k")}},
		{"overflow", []optStep{st("SET", "$k", "v"), st("EXPIRE", "$k", "9223372036854775807"), st("PEXPIRE", "$k", "9223372036854775807"), st("EXPIRE", "$k", "-9223372036854775807"), st("PTTL", "$k")}},
		{"wrong arity", []optStep{st("EXPIRE", "$k"), st("PEXPIRE")}},
	}},
	{"EXPIREAT", []optCase{
		{"plain", []optStep{st("EXPIREAT", "$k", "{s+20}"), st("SET", "$k", "v"), st("EXPIREAT", "$k", "{s+20}"), near(2, "TTL", "$k"), st("PEXPIREAT", "$k", "{ms+30000}"), near(2000, "PTTL", "$k")}},
		{"past deletes", []optStep{st("SET", "$k", "v"), st("EXPIREAT", "$k", "{s-10}"), st("EXISTS", "$k"), st("SET", "$k", "v"), st("PEXPIREAT", "$k", "1"), st("EXISTS", "$k"), st("PEXPIREAT", "$k", "1")}},
		{"now deletes", []optStep{st("SET", "$k", "v", "PX", "20000"), st("PEXPIREAT", "$k", "{ms+0}"), st("EXISTS", "$k")}},
		{"NX XX GT LT", []optStep{st("SET", "$k", "v"), st("PEXPIREAT", "$k", "{ms+20000}", "XX"), st("PEXPIREAT", "$k", "{ms+20000}", "GT"), st("PEXPIREAT", "$k", "{ms+20000}", "NX"), near(2000, "PTTL", "$k"), st("PEXPIREAT", "$k", "{ms+10000}", "GT"), st("PEXPIREAT", "$k", "{ms+30000}", "GT"), near(2000, "PTTL", "$k"), st("EXPIREAT", "$k", "{s+40}", "LT"), st("EXPIREAT", "$k", "{s+10}", "LT"), near(2, "TTL", "$k")}},
		{"past with GT", []optStep{st("SET", "$k", "v", "EX", "20"), st("PEXPIREAT", "$k", "1", "GT"), st("EXISTS", "$k"), st("PEXPIREAT", "$k", "1", "LT"), st("EXISTS", "$k")}},
		{"errors", []optStep{st("SET", "$k", "v"), st("EXPIREAT", "$k", "soon"), st("EXPIREAT", "$k", "10", "NX", "GT"), st("PEXPIREAT", "$k", "10", "SOON"), st("EXPIREAT", "$k", "9223372036854775807"), st("PTTL", "$k")}},
	}},
	{"EXPIRETIME", []optCase{
		{"absent, none, set", []optStep{st("EXPIRETIME", "$k"), st("PEXPIRETIME", "$k"), st("SET", "$k", "v"), st("EXPIRETIME", "$k"), st("PEXPIRETIME", "$k"), st("SET", "$k", "v", "PXAT", "{ms+20000}"), near(2, "EXPIRETIME", "$k"), near(2000, "PEXPIRETIME", "$k")}},
		{"after EXPIREAT", []optStep{st("SET", "$k", "v"), st("EXPIREAT", "$k", "{s+30}"), near(2, "EXPIRETIME", "$k")}},
		{"wrong arity", []optStep{st("EXPIRETIME"), st("PEXPIRETIME", "$k", "x")}},
	}},
}

func TestSetExpireOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	ref := testkit.Dial(t, startRedis(t).Addr())
	p := startProxy(t, startCluster(t, 3), "")
	proxy := testkit.Dial(t, p.Addr())
	for _, tab := range optTables {
		t.Run(tab.option, func(t *testing.T) {
			runOptCases(t, ref, proxy, tab.option, tab.cases)
		})
	}
}

// TestSetExpireBeyondMaxTTL: a ttl beyond max_ttl is taken as one Redis
// takes it, with each kind's rule (docs/safety.md, "Locks and data").
// Data (a plain SET and its expiries) is stored so on every backend. A
// lock (SET NX PX, then SET XX and EXPIRE of its token) is answered as one
// Redis answers, PTTL counting down from the long ttl, while the copies
// carry the lease and the proxy holds the key to the deadline. With
// default_ttl = 0 (no hold) data is still stored as asked.
func TestSetExpireBeyondMaxTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	rs := startCluster(t, 3)
	p := startProxy(t, rs, `max_ttl = "60s"`)
	c := testkit.Dial(t, p.Addr())
	ctx := testCtx(t, 10*time.Second)
	for _, tc := range []struct {
		key, first string
		steps      [][]string
		value      string
	}{
		{"k", "SET k v PX 20000", [][]string{
			{"SET", "k", "w", "XX", "EX", "120"},
			{"SET", "k", "x", "GET", "PXAT", expandArg("{ms+120000}", "")},
			{"EXPIRE", "k", "130", "GT"},
			{"PEXPIREAT", "k", expandArg("{ms+140000}", "")},
		}, "x"},
		{"lk", "SET lk tok NX PX 20000", [][]string{
			{"SET", "lk", "tok", "XX", "EX", "120"},
			{"EXPIRE", "lk", "130", "GT"},
			{"PEXPIREAT", "lk", expandArg("{ms+140000}", "")},
		}, "tok"},
	} {
		if got := c.Do(strings.Fields(tc.first)...); got != "OK" {
			t.Fatalf("%s: %#v", tc.first, got)
		}
		for _, step := range tc.steps {
			want := any(int64(1))
			if step[0] == "SET" {
				want = "OK"
				if slices.Contains(step, "GET") {
					want = "w"
				}
			}
			if got := c.Do(step...); got != want {
				t.Errorf("%q: %#v, want %#v", step, got, want)
			}
		}
		if got := c.Do("EXPIREAT", tc.key, expandArg("{s+150}", ""), "NX"); got != int64(0) {
			t.Errorf("EXPIREAT NX of %s: %#v, want 0", tc.key, got)
		}
		if got := c.Do("GET", tc.key); got != tc.value {
			t.Errorf("GET %s: %#v, want %s", tc.key, got, tc.value)
		}
		if ms, _ := c.Do("PTTL", tc.key).(int64); ms <= 130000 || ms > 140000 {
			t.Errorf("PTTL %s: %d, want about 140000", tc.key, ms)
		}
	}
	backendsAsAsked(ctx, t, rs, "k", 140*time.Second)
	backendsBounded(ctx, t, rs, "lk", 60*time.Second)

	q := startProxy(t, rs, `max_ttl = "60s"
default_ttl = "0s"`)
	if got := testkit.Dial(t, q.Addr()).Do("SET", "k", "w", "EX", "120"); got != "OK" {
		t.Errorf("SET EX 120 of data with default_ttl = 0: %#v, want OK", got)
	}
}

// Lock scripts the proxy recognises as an extend until an absolute
// deadline (PEXPIREAT, EXPIREAT, SET XX PXAT where the key holds the
// token), called with deadlines a few ms ahead, now, past, zero and
// negative, on keys held by the token, by another value, and absent.
const (
	pexpireatIfHeld = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIREAT", KEYS[1], ARGV[2]) end return 0`
	expireatIfHeld  = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("expireat", KEYS[1], ARGV[2]) else return 0 end`
	setPXATIfHeld   = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('set', KEYS[1], ARGV[1], 'XX', 'PXAT', ARGV[2]) end return false`
)

var deadlineCases = []optCase{
	{"PEXPIREAT far ahead", []optStep{st("SET", "$k", "t", "PX", "5000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "{ms+30000}"), near(2000, "PTTL", "$k")}},
	{"PEXPIREAT 2 ms ahead", []optStep{st("SET", "$k", "t", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "{ms+2}")}},
	{"PEXPIREAT 5 ms ahead", []optStep{st("SET", "$k", "t", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "{ms+5}")}},
	{"PEXPIREAT now", []optStep{st("SET", "$k", "t", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "{ms+0}"), st("EXISTS", "$k")}},
	{"PEXPIREAT past", []optStep{st("SET", "$k", "t", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "{ms-1000}"), st("EXISTS", "$k")}},
	{"PEXPIREAT 1, 0, negative", []optStep{
		st("SET", "$k", "t", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "1"), st("EXISTS", "$k"),
		st("SET", "$k", "t", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "0"), st("EXISTS", "$k"),
		st("SET", "$k", "t", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "-5"), st("EXISTS", "$k")}},
	{"PEXPIREAT past, another owner", []optStep{st("SET", "$k", "u", "PX", "20000"), st("EVAL", pexpireatIfHeld, "1", "$k", "t", "{ms-1000}"), st("GET", "$k"), near(2000, "PTTL", "$k")}},
	{"PEXPIREAT past, absent", []optStep{st("EVAL", pexpireatIfHeld, "1", "$k", "t", "{ms-1000}"), st("EXISTS", "$k")}},
	{"EXPIREAT past and now", []optStep{
		st("SET", "$k", "t", "EX", "20"), st("EVAL", expireatIfHeld, "1", "$k", "t", "{s-10}"), st("EXISTS", "$k"),
		st("SET", "$k", "t", "EX", "20"), st("EVAL", expireatIfHeld, "1", "$k", "t", "{s+0}"), st("EXISTS", "$k")}},
	{"SET XX PXAT near and past", []optStep{
		st("SET", "$k", "t", "PX", "20000"), st("EVAL", setPXATIfHeld, "1", "$k", "t", "{ms+3}"),
		st("SET", "$k", "t", "PX", "20000"), st("EVAL", setPXATIfHeld, "1", "$k", "t", "{ms-1000}"), st("EXISTS", "$k"),
		st("SET", "$k", "u", "PX", "20000"), st("EVAL", setPXATIfHeld, "1", "$k", "t", "{ms-1000}"), st("GET", "$k")}},
}

// TestScriptDeadlines: a recognised extend until an absolute deadline
// answers as one Redis does however near the deadline: a few ms ahead it
// extends (1), the key then expires; now or past it deletes a key the
// token holds (1) and leaves another owner's.
func TestScriptDeadlines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	ref := testkit.Dial(t, startRedis(t).Addr())
	p := startProxy(t, startCluster(t, 3), "")
	proxy := testkit.Dial(t, p.Addr())
	runOptCases(t, ref, proxy, "DEADLINE", deadlineCases)
	// The keys extended a few ms ahead expire.
	for i, c := range deadlineCases {
		if !strings.Contains(c.name, "ms ahead") && !strings.Contains(c.name, "near") {
			continue
		}
		k := fmt.Sprintf("DEADLINE:%d:k", i)
		testkit.Eventually(t, 5*time.Second, c.name+": the key expires", func() bool {
			return proxy.Do("EXISTS", k) == int64(0) || proxy.Do("GET", k) == "u"
		})
	}
	if strings.Contains(p.Log(), "script runs by vote on every backend") {
		t.Errorf("an extend script was not recognised:\n%s", p.Log())
	}

}
