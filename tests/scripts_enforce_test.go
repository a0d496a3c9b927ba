package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The run-time check of scripts by vote (docs/safety.md, "Scripts by
// vote"): a user limited to tenant:42 and tenant:42:* sends scripts that
// try to reach past its keys, crash the backends or stall them. Each is
// answered with an error; nothing outside the user's keys changes; after
// each, every backend answers PING and a LOCK is granted through a second
// proxy within script_timeout + 1 s.

const enforceUsers = `
script_timeout = "2s"
user "tenant" {
  password = "tenant-secret-42"
  commands = ["*"]
  keys     = ["tenant:42", "tenant:42:*"]
  scripts  = "vote"
}
user "plain" {
  password = "plain-secret-7"
  commands = ["*"]
  keys     = ["plain:*"]
}
user "ops" {
  password = "ops-secret-0"
  commands = ["*"]
  keys     = ["*"]
  admin    = true
}`

// enforced is a cluster of three backends and two proxies with
// enforceUsers: the tenant's and ops' clients of the first, and the
// tenant's client of the second, which backendsFine locks through.
type enforced struct {
	rs                  []*redisProc
	tenant, ops, second *redis.Client
}

func enforceCluster(t *testing.T) *enforced {
	t.Helper()
	rs := startCluster(t, 3)
	p, q := startProxy(t, rs, enforceUsers), startProxy(t, rs, enforceUsers)
	as := func(p *proxyProc, user, pass string) *redis.Client {
		return p.Client(&redis.Options{Username: user, Password: pass, ReadTimeout: 10 * time.Second})
	}
	return &enforced{rs: rs, tenant: as(p, "tenant", "tenant-secret-42"), ops: as(p, "ops", "ops-secret-0"),
		second: as(q, "tenant", "tenant-secret-42")}
}

// backendsFine fails t unless every backend answers PING within a second
// and the tenant is granted a LOCK through the second proxy within
// script_timeout + 1 s.
func (e *enforced) backendsFine(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	for _, r := range e.rs {
		c, cancel := context.WithTimeout(ctx, time.Second)
		err := r.Client().Ping(c).Err()
		cancel()
		if err != nil {
			t.Fatalf("after %s: backend %s does not answer PING: %v", what, r.Addr(), err)
		}
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := e.second.Do(c, "LOCK", "tenant:42:lock", 1000).Slice()
	if err != nil || len(v) != 3 {
		t.Fatalf("after %s: LOCK = %v, %v; want granted", what, v, err)
	}
	if err := e.second.Do(ctx, "UNLOCK", "tenant:42:lock", v[0]).Err(); err != nil {
		t.Fatalf("after %s: UNLOCK: %v", what, err)
	}
}

// onEvery returns GET key on each backend.
func onEvery(ctx context.Context, rs []*redisProc, key string) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		v, err := r.Client().Get(ctx, key).Result()
		if err != nil {
			v = "<" + err.Error() + ">"
		}
		out[i] = v
	}
	return out
}

// TestScriptEnforceEscapes: aliases of KEYS and ARGV, a key built past
// the user's patterns, and FLUSHALL through an alias reach nothing.
func TestScriptEnforceEscapes(t *testing.T) {
	t.Parallel()
	e := enforceCluster(t)
	rs, tenant, ops := e.rs, e.tenant, e.ops
	ctx := testCtx(t, 60*time.Second)
	for _, k := range []string{"other:1", "tenant:421"} {
		if err := ops.Set(ctx, k, "orig", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		name, src string
		args      []any
	}{
		{"pairs(KEYS) alias", "local _, k = pairs(KEYS)\nk[1] = 'other:1'\nreturn redis.call('SET', KEYS[1], 'pwned')", nil},
		{"ipairs(KEYS) alias", "local _, k = ipairs(KEYS)\nk[1] = 'other:1'\nreturn redis.call('SET', KEYS[1], 'pwned')", nil},
		{"ipairs(ARGV) alias to FLUSHALL", "local _, a = ipairs(ARGV)\na[1] = 'flushall'\nreturn redis.call(ARGV[1])", []any{"ping"}},
		{"built key past the patterns", "return redis.call('SET', KEYS[1] .. '1', 'pwned')", nil},
		{"_G.redis", "return _G.redis.call('FLUSHALL')", nil},
		{"loadstring", "return loadstring('return redis.call(\"flushall\")')()", nil},
		{"getfenv", "return getfenv(1).redis.call('SET', 'other:1', 'pwned')", nil},
	} {
		_, err := tenant.Eval(ctx, s.src, []string{"tenant:42"}, s.args...).Result()
		if err == nil {
			t.Errorf("%s: the script ran; want an error", s.name)
		}
		for _, k := range []string{"other:1", "tenant:421"} {
			for i, v := range onEvery(ctx, rs, k) {
				if v != "orig" {
					t.Fatalf("%s: %s on backend %d = %q, want orig (err %v)", s.name, k, i, v, err)
				}
			}
		}
		e.backendsFine(ctx, t, s.name)
	}
	// A key built within the patterns is fine.
	if err := tenant.Eval(ctx, "return redis.call('SET', KEYS[1] .. ':x', 'ok')", []string{"tenant:42"}).Err(); err != nil {
		t.Fatalf("a built key within the patterns: %v", err)
	}
}

// TestScriptEnforceErrorObject: an error object whose __tostring is error
// (which crashed Redis 7.0 through the wrapper's tostring) is answered as
// an error, and every backend lives.
func TestScriptEnforceErrorObject(t *testing.T) {
	t.Parallel()
	e := enforceCluster(t)
	tenant := e.tenant
	ctx := testCtx(t, 60*time.Second)
	for _, src := range []string{
		"redis.call('GET', KEYS[1])\nerror(setmetatable({}, {__tostring = error}))",
		"redis.call('GET', KEYS[1])\nerror({err = setmetatable({}, {__tostring = error})})",
		"redis.call('GET', KEYS[1])\nerror({err = setmetatable({}, {__tostring = function() return {} end})})",
		"redis.call('GET', KEYS[1])\nerror(setmetatable({err = {}}, {__index = error, __newindex = error, __tostring = error}))",
		"redis.call('GET', KEYS[1])\nerror(setmetatable({}, {__index = function() error('x') end}))",
	} {
		err := tenant.Eval(ctx, src, []string{"tenant:42"}).Err()
		if err == nil || !strings.Contains(err.Error(), "ERR") {
			t.Errorf("%q: %v, want an error", src, err)
		}
		e.backendsFine(ctx, t, src)
	}
}

// TestScriptEnforceBounds: C-level work and writes a runaway cannot
// escape: a backtracking pattern, a huge string.rep, a loop writing 200,000
// keys, SETRANGE at a huge offset (in a script and sent directly).
func TestScriptEnforceBounds(t *testing.T) {
	t.Parallel()
	e := enforceCluster(t)
	rs, tenant := e.rs, e.tenant
	ctx := testCtx(t, 120*time.Second)
	if err := tenant.Set(ctx, "tenant:42", strings.Repeat("a", 40), 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name, src string
		args      []any
		want      string
	}{
		{"backtracking pattern", "local v = redis.call('GET', KEYS[1])\nreturn string.find(v, ARGV[1])", []any{"a*a*a*a*a*a*a*a*a*a*a*b"}, "backtrack"},
		{"string.rep", "local v = redis.call('GET', KEYS[1])\nreturn #string.rep(v, tonumber(ARGV[1]))", []any{"100000000"}, "string.rep"},
		{"a string's rep", "local v = redis.call('GET', KEYS[1])\nreturn #v:rep(tonumber(ARGV[1]))", []any{"100000000"}, "string.rep"},
		{"200k keys", "for i = 1, tonumber(ARGV[1]) do redis.call('SET', KEYS[1] .. ':' .. i, ARGV[2]) end\nreturn 1", []any{"200000", strings.Repeat("x", 1000)}, "wrote more than"},
		{"SETRANGE", "return redis.call('SETRANGE', KEYS[1], ARGV[1], 'x')", []any{"33554431"}, "max_value_bytes"},
		// A string's own methods and string building, by aliases the
		// analysis does not follow: bounded as they run (8 MiB asked, 1 MiB
		// the most).
		{"a string's method kept in a local", "local v = redis.call('GET', KEYS[1])\nlocal f = v[ARGV[1]]\nreturn #f(v, tonumber(ARGV[2]))", []any{"rep", "200000"}, "string.rep"},
		{"the string metatable", "local v = redis.call('GET', KEYS[1])\nlocal s = getmetatable(v).__index\nreturn #s.rep(v, tonumber(ARGV[1]))", []any{"200000"}, "string.rep"},
		{"'..' doubling", "local v = redis.call('GET', KEYS[1])\nfor i = 1, tonumber(ARGV[1]) do v = v .. v end\nreturn #v", []any{"18"}, "with .."},
		{"string.format of many arguments", "local v = string.rep(redis.call('GET', KEYS[1]), 20000)\nlocal t = {}\nfor i = 1, 10 do t[i] = v end\nreturn #string.format(string.rep('%s', 10), unpack(t))", nil, "string.format"},
	} {
		start := time.Now()
		err := tenant.Eval(ctx, s.src, []string{"tenant:42"}, s.args...).Err()
		if err == nil || !strings.Contains(err.Error(), s.want) {
			t.Errorf("%s: %v; want an error naming %q", s.name, err, s.want)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: took %v", s.name, d)
		}
		e.backendsFine(ctx, t, s.name)
	}
	for i, r := range rs {
		if n, err := r.Client().DBSize(ctx).Result(); err != nil || n > 1_100 {
			t.Errorf("backend %d holds %d keys (%v): the write budget did not stop the loop", i, n, err)
		}
		if n, err := r.Client().StrLen(ctx, "tenant:42").Result(); err != nil || n > 4096 {
			t.Errorf("backend %d: tenant:42 is %d bytes (%v), past max_value_bytes", i, n, err)
		}
	}
	for _, cmd := range [][]any{{"SETRANGE", "tenant:42", "33554431", "x"}, {"SETBIT", "tenant:42", "268435455", "1"}} {
		if err := tenant.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "max_value_bytes") {
			t.Errorf("%v sent directly: %v; want refused past max_value_bytes", cmd, err)
		}
	}
	for i, r := range rs {
		if n, err := r.Client().StrLen(ctx, "tenant:42").Result(); err != nil || n > 4096 {
			t.Errorf("backend %d: tenant:42 is %d bytes (%v), past max_value_bytes", i, n, err)
		}
	}
	// APPEND grows a value up to max_value_bytes, no further.
	if err := tenant.Set(ctx, "tenant:42:s", strings.Repeat("y", 4000), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := tenant.Append(ctx, "tenant:42:s", strings.Repeat("z", 200)).Err(); err == nil || !strings.Contains(err.Error(), "max_value_bytes") {
		t.Errorf("APPEND past max_value_bytes: %v; want refused", err)
	}
}

// TestScriptEnforceSortedReplies: the replies of unordered reads reach
// the script sorted, so a script that uses one is deterministic and runs.
func TestScriptEnforceSortedReplies(t *testing.T) {
	t.Parallel()
	e := enforceCluster(t)
	tenant := e.tenant
	ctx := testCtx(t, 60*time.Second)
	src := "redis.call('HSET', KEYS[1], 'c', '1', 'a', '2', 'b', '3')\nlocal k = redis.call('HKEYS', KEYS[1])\nreturn k[1] .. k[2] .. k[3]"
	v, err := tenant.Eval(ctx, src, []string{"tenant:42:h"}).Result()
	if err != nil || v != "abc" {
		t.Fatalf("HKEYS in a script = %v, %v; want abc", v, err)
	}
	e.backendsFine(ctx, t, "HKEYS")
}

// TestScriptEnforcePerUser: a user limited to key patterns runs only
// recognised scripts unless its block says scripts = "vote"; a recognised
// lock script still runs.
func TestScriptEnforcePerUser(t *testing.T) {
	t.Parallel()
	e := enforceCluster(t)
	rs, tenant := e.rs, e.tenant
	ctx := testCtx(t, 60*time.Second)
	p := startProxy(t, rs, enforceUsers)
	plain := p.Client(&redis.Options{Username: "plain", Password: "plain-secret-7"})
	src := "return redis.call('INCR', KEYS[1])"
	if err := plain.Eval(ctx, src, []string{"plain:1"}).Err(); err == nil || !strings.Contains(err.Error(), "recognises as lock operations") {
		t.Fatalf("a script by vote from a user limited to key patterns: %v; want refused", err)
	}
	if err := tenant.Eval(ctx, src, []string{"tenant:42:n"}).Err(); err != nil {
		t.Fatalf("a script by vote from a user with scripts = vote: %v", err)
	}
	release := "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
	if err := plain.SetNX(ctx, "plain:lock", "tok", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := plain.Eval(ctx, release, []string{"plain:lock"}, "tok").Int(); err != nil || n != 1 {
		t.Fatalf("a recognised release from a user limited to key patterns = %v, %v; want 1", n, err)
	}
}
