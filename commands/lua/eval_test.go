package lua

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

// views serves KeyViews from a map and counts the calls per key.
type views struct {
	mu    sync.Mutex
	m     map[string]KeyView
	calls map[string]int
}

func newViews(m map[string]KeyView) *views { return &views{m: m, calls: map[string]int{}} }

func (v *views) view(k string) KeyView {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls[k]++
	return v.m[k]
}

func held(val string, pttl time.Duration) KeyView {
	return KeyView{Exists: true, Value: val, PTTL: pttl}
}

func TestEvalRead(t *testing.T) {
	remaining := `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pttl', KEYS[1]) end return 0`
	ttl := `local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] then return redis.error_reply('ERROR') end
return redis.call('TTL', KEYS[1])`
	pair := `return {redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1])}`
	both := `return redis.call('mget', unpack(KEYS))`
	cases := []struct {
		name, src string
		keys      []string
		argv      []string
		data      map[string]KeyView
		want      Value
	}{
		{"remaining, mine", remaining, []string{"k"}, []string{"t"}, map[string]KeyView{"k": held("t", 12345*time.Millisecond)}, IntValue(12345)},
		{"remaining, another's", remaining, []string{"k"}, []string{"t"}, map[string]KeyView{"k": held("u", time.Second)}, IntValue(0)},
		{"remaining, absent", remaining, []string{"k"}, []string{"t"}, nil, IntValue(0)},
		{"ttl in seconds, rounded", ttl, []string{"k"}, []string{"t"}, map[string]KeyView{"k": held("t", 12600*time.Millisecond)}, IntValue(13)},
		{"ttl without expiry", ttl, []string{"k"}, []string{"t"}, map[string]KeyView{"k": held("t", -1)}, IntValue(-1)},
		{"ttl, another's", ttl, []string{"k"}, []string{"t"}, map[string]KeyView{"k": held("u", time.Second)}, ErrorValue("ERR ERROR")},
		{"value and pttl, absent", pair, []string{"k"}, nil, nil, ArrayValue(NilValue(), IntValue(-2))},
		{"value and pttl", pair, []string{"k"}, nil, map[string]KeyView{"k": held("v", 5*time.Second)}, ArrayValue(BulkValue("v"), IntValue(5000))},
		{"two keys", both, []string{"a", "b"}, nil, map[string]KeyView{"b": held("y", -1)}, ArrayValue(NilValue(), BulkValue("y"))},
		// '-' after ')' or a quantifier is a character, not a quantifier.
		{"date fields", "local y,m,d = string.match(ARGV[1], '(%d+)-(%d+)-(%d+)') return {tonumber(y),tonumber(m),tonumber(d)}", nil, []string{"2024-01-05"}, nil, ArrayValue(IntValue(2024), IntValue(1), IntValue(5))},
		{"uuid", "return string.match(ARGV[1], '^%x+-%x+-%x+-%x+-%x+$') and 1 or 0", nil, []string{"123e4567-e89b-12d3-a456-426614174000"}, nil, IntValue(1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := analyze(t, c.src)
			if a.Meaning == nil || a.Meaning.Op != OpRead {
				t.Fatalf("not a read: %v (%s)", a.Meaning, a.NotRecognised)
			}
			v := newViews(c.data)
			got, err := a.EvalRead(c.keys, c.argv, v.view)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, n := range v.calls {
				if n != 1 {
					t.Errorf("view(%q) called %d times", k, n)
				}
			}
		})
	}
}

func TestEvalReadScope(t *testing.T) {
	if m := recognised(t, `return redis.call('get', KEYS[1])`); m.Op != OpRead || m.Keys != FirstKey {
		t.Fatalf("%v, scope %v", m, m.Keys)
	}
	if m := recognised(t, `return redis.call('exists', unpack(KEYS))`); m.Op != OpRead || m.Keys != AllKeys {
		t.Fatalf("%v, scope %v", m, m.Keys)
	}
}

func TestEvalReadRefusals(t *testing.T) {
	a := analyze(t, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
	if _, err := a.EvalRead([]string{"k"}, []string{"t"}, newViews(nil).view); !errors.Is(err, ErrNotRead) {
		t.Fatalf("EvalRead of a release: %v", err)
	}
	// A read that raises an error on some probe is not recognised: its
	// error text would not be Redis's.
	if a := analyze(t, `local v = redis.call('get', KEYS[1]) if v == 'boom!' then error('boom') end return v`); a.Meaning != nil {
		t.Fatalf("recognised %v", a.Meaning)
	}
}

// A slow view (a quorum read) does not count against the script's time.
func TestEvalReadSlowView(t *testing.T) {
	a := analyze(t, `local v = redis.call('mget', unpack(KEYS))
local n = 0
for i = 1, 1000 do n = n + i end
return v`)
	slow := func(string) KeyView { time.Sleep(evalTime); return held("v", -1) }
	got, err := a.EvalRead([]string{"a", "b"}, nil, slow)
	if err != nil || !got.Equal(ArrayValue(BulkValue("v"), BulkValue("v"))) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// Many goroutines evaluate the same analysis at once (run with -race).
func TestEvalReadConcurrent(t *testing.T) {
	a := analyze(t, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pttl', KEYS[1]) end return 0`)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				pttl := time.Duration(g*1000+i) * time.Millisecond
				v := newViews(map[string]KeyView{"k": held("t", pttl)})
				got, err := a.EvalRead([]string{"k"}, []string{"t"}, v.view)
				if err != nil || !got.Equal(IntValue(pttl.Milliseconds())) {
					t.Errorf("got %v, %v; want %d", got, err, pttl.Milliseconds())
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Analyze itself is safe to call from many goroutines.
func TestAnalyzeConcurrent(t *testing.T) {
	srcs := []string{
		`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`,
		`return redis.call('get', KEYS[1])`,
		`redis.call('hset', KEYS[1], 'a', 1)`,
	}
	want := make([]Verdict, len(srcs))
	for i, s := range srcs {
		want[i] = Analyze([]byte(s)).Verdict()
	}
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, s := range srcs {
				if got := Analyze([]byte(s)).Verdict(); got != want[i] {
					t.Errorf("verdict %v, want %v", got, want[i])
				}
			}
		}()
	}
	wg.Wait()
}

// TestEvalReadRepliesAsRedis7: what a read answered in the proxy converts
// as Redis 7.0 converts it (seen against redis-server 7.0.15): a number
// out of long long's range is its minimum, as the C cast gives on amd64;
// redis.error_reply gives a text without a code the code ERR; its
// arguments are checked as Redis checks them.
func TestEvalReadRepliesAsRedis7(t *testing.T) {
	cases := []struct {
		src  string
		want Value
	}{
		{`return 1e100`, IntValue(math.MinInt64)},
		{`return -1e100`, IntValue(math.MinInt64)},
		{`return 1/0`, IntValue(math.MinInt64)},
		{`return 2^63`, IntValue(math.MinInt64)},
		{`return -2^63`, IntValue(math.MinInt64)},
		{`return 2^62`, IntValue(1 << 62)},
		{`return -3.99`, IntValue(-3)},
		{`return redis.error_reply('boom')`, ErrorValue("ERR boom")},
		{`return redis.error_reply('MYCODE boom')`, ErrorValue("MYCODE boom")},
		{`return redis.error_reply('-MYCODE boom')`, ErrorValue("MYCODE boom")},
		{`return redis.error_reply('-X')`, ErrorValue("ERR X")},
		{`return redis.error_reply('')`, ErrorValue("ERR ")},
		{"return redis.error_reply('a b\\r\\n')", ErrorValue("a b")},
		{`return redis.error_reply('boom').err`, BulkValue("ERR boom")},
		{`return {redis.error_reply('boom')}`, ArrayValue(ErrorValue("ERR boom"))},
		{`return redis.error_reply(1)`, ErrorValue("ERR wrong number or type of arguments")},
		{`return redis.status_reply(1)`, ErrorValue("ERR wrong number or type of arguments")},
		{`return redis.status_reply('a', 'b')`, ErrorValue("ERR wrong number or type of arguments")},
		{`return redis.status_reply('PONG')`, StatusValue("PONG")},
	}
	for _, c := range cases {
		a := analyze(t, "local _ = redis.call('get', KEYS[1]) "+c.src)
		if a.Meaning == nil || a.Meaning.Op != OpRead {
			t.Errorf("%s: not a read: %v (%s)", c.src, a.Meaning, a.NotRecognised)
			continue
		}
		got, err := a.EvalRead([]string{"k"}, nil, newViews(nil).view)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%s: got %v, %v; want %v", c.src, got, err, c.want)
		}
	}
}

// TestRESP3FormsRunByVote: {double=…}, {big_number=…}, {map=…} and
// {set=…} are written by Redis in the client's protocol (a map in Lua
// 5.1's table order); the proxy answered them as an empty array. Such a
// script is no recognised read: it runs by vote, where a backend writes it.
func TestRESP3FormsRunByVote(t *testing.T) {
	for _, src := range []string{
		`return {double=3.14}`,
		`return {big_number='123'}`,
		`return {map={a=1}}`,
		`return {set={a=true}}`,
		`return {1, {double=1.5}}`,
	} {
		a := analyze(t, "local _ = redis.call('get', KEYS[1]) "+src)
		if a.Meaning != nil || a.Vote == nil {
			t.Errorf("%s: meaning %v, vote %v, problem %v", src, a.Meaning, a.Vote != nil, a.Problem)
		}
	}
}

// TestEvalReadFormOnUnprobedBranch: a read whose RESP3 form sits on a
// branch no probe takes gives ErrByVote when a run reaches it, and the
// proxy runs it by vote.
func TestEvalReadFormOnUnprobedBranch(t *testing.T) {
	a := analyze(t, `local v = redis.call('get', KEYS[1]) if ARGV[1] > 'zzz' then return {double = 1.5} end return v`)
	if a.Meaning == nil || a.Meaning.Op != OpRead {
		t.Skipf("not a read (%s): the branch is probed", a.NotRecognised)
	}
	if _, err := a.EvalRead([]string{"k"}, []string{"zzzz"}, newViews(nil).view); !errors.Is(err, ErrByVote) {
		t.Fatalf("EvalRead: %v, want ErrByVote", err)
	}
}
