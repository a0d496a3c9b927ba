package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestKeptWhenChangedInPlace: a key written without expiry, then changed
// in place (APPEND, SETRANGE, INCR, or a script doing the same), is still
// there three leases later with TTL -1, as on one Redis. Changed by a
// data command, or by a script by vote that writes it without reading it
// first, every backend's copy has no expiry, as the client gave it
// (docs/safety.md, "Locks and data"); changed by a script that read it
// first (a lock's rule: its write depends on the key's earlier state),
// every copy is within max_ttl and the proxy holds the key, whatever
// value the script left: the hold follows the key, not the value first
// written.
func TestKeptWhenChangedInPlace(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	changes := []struct {
		name   string
		script bool // by vote: a lock's rule, clamped and held
		do     func(key string) error
	}{
		{"APPEND", false, func(k string) error { return c.Append(ctx, k, "x").Err() }},
		{"SETRANGE", false, func(k string) error { return c.SetRange(ctx, k, 0, "9").Err() }},
		{"INCR", false, func(k string) error { return c.Incr(ctx, k).Err() }},
		{"script INCR", false, func(k string) error {
			return c.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{k}).Err()
		}},
		{"script APPEND", false, func(k string) error {
			return c.Eval(ctx, "return redis.call('APPEND', KEYS[1], 'x')", []string{k}).Err()
		}},
		{"script GET then APPEND", true, func(k string) error {
			return c.Eval(ctx, "if redis.call('GET', KEYS[1]) then return redis.call('APPEND', KEYS[1], 'x') end return 0", []string{k}).Err()
		}},
		{"script GET then SET", true, func(k string) error {
			return c.Eval(ctx, "local v = redis.call('GET', KEYS[1]) return redis.call('SET', KEYS[1], v .. 'x')", []string{k}).Err()
		}},
	}
	for i, ch := range changes {
		key := fmt.Sprintf("inplace:%d", i)
		if err := c.Set(ctx, key, "5", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := ch.do(key); err != nil {
			t.Fatalf("%s: %v", ch.name, err)
		}
	}
	time.Sleep(3*2*time.Second + time.Second) // three leases: a held copy not renewed is gone
	for i, ch := range changes {
		key := fmt.Sprintf("inplace:%d", i)
		if _, err := c.Get(ctx, key).Result(); err != nil {
			t.Errorf("%s of a key without expiry: GET three leases later = %v (one Redis keeps it)", ch.name, err)
		}
		if ttl, err := c.TTL(ctx, key).Result(); err != nil || ttl != -1 {
			t.Errorf("%s: TTL = %v, %v; want -1", ch.name, ttl, err)
		}
		if ch.script {
			backendsBounded(ctx, t, rs, key, clampMax)
		} else {
			backendsAsAsked(ctx, t, rs, key, -1)
		}
	}
}

// TestErrorObjectsDoNotCrashBackends: Redis 7.0 crashes on a script error
// that is a table without a string err field. A script by vote reaches
// every backend at once, so the proxy sends none unguarded: the client
// gets an error, and every backend is alive after, for read-only scripts
// and writing ones.
func TestErrorObjectsDoNotCrashBackends(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	c := p.Client(&redis.Options{MaxRetries: -1})
	ctx := testCtx(t, 30*time.Second)
	for _, src := range []string{
		"error({})",
		"if redis.call('GET', KEYS[1]) == false then error({}) end return 1",
		"redis.call('SET', KEYS[1], '1', 'PX', 1000) error({err = 5})",
	} {
		err := c.Eval(ctx, src, []string{"crash:k"}).Err()
		if err == nil {
			t.Errorf("EVAL %q answered no error", src)
		}
		for i, r := range rs {
			if perr := pingRaw(r.Addr(), 2*time.Second); perr != nil {
				t.Fatalf("EVAL %q (answered %v): backend %d is down: %v", src, err, i, perr)
			}
		}
	}
}

// TestScriptCannotReachTheWrapper: the body of a script by vote cannot
// name the wrapper's state (the real redis the epilogue calls, the keys
// noted, its own function), nor take Redis's own redis from a shadow's
// metatable: each such reach fails, no key escapes its bound, no backend
// is flushed or crashes, and the lock held meanwhile stays held. Before,
// the wrapper's locals were upvalues of the body: a user limited to
// orders:* wrote any key with no expiry, flushed every backend with
// allow_flush off, or crashed them with the epilogue's redis replaced.
func TestScriptCannotReachTheWrapper(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL+`
user "orders" {
  password = "pw1"
  commands = ["EVAL", "EVALSHA", "GET", "LOCK"]
  keys     = ["orders:*"]
}
`)
	c := p.Client(&redis.Options{Username: "orders", Password: "pw1", MaxRetries: -1})
	ctx := testCtx(t, 60*time.Second)
	lock, err := c.Do(ctx, "LOCK", "orders:lock", 3000).Slice()
	if err != nil {
		t.Fatalf("LOCK: %v", err)
	}
	for _, src := range []string{
		"redis.call('SET', KEYS[1], 'x', 'PX', 100) __rp_r0.call('SET', 'other:victim', 'forever') return 1",
		"redis.call('SET', KEYS[1], 'v') __rp_r0 = nil return 'ok'",
		"redis.call('SET', KEYS[1], 'x', 'PX', 100) return __rp_r0.call('FLUSHALL')",
		"redis.call('SET', KEYS[1], 'x', 'PX', 100) __rp_r0 = {call = function() error({}) end} return 1",
		"redis.call('SET', KEYS[1], 'x', 'PX', 100) return __redlock_proxy_body(redis)",
		"redis.call('SET', KEYS[1], 'x', 'PX', 100) __rp_seen = nil return 1",
		// A script that builds keys gets a shadow redis: its metatable is closed.
		"redis.call('SET', KEYS[1] .. ':b', 'x') local m = getmetatable(redis) return m and m.__index.call('SET', 'other:victim', 'y') or 0",
	} {
		_, err := c.Eval(ctx, src, []string{"orders:k"}).Result()
		t.Logf("%q: %v", src, err)
		for i, r := range rs {
			if perr := pingRaw(r.Addr(), 2*time.Second); perr != nil {
				t.Fatalf("EVAL %q (answered %v): backend %d is down: %v", src, err, i, perr)
			}
			if n := r.Client().Exists(ctx, "other:victim").Val(); n != 0 {
				t.Errorf("EVAL %q wrote other:victim on backend %d", src, i)
			}
		}
	}
	// orders:k had no expiry only if the epilogue was skipped.
	backendsBounded(ctx, t, rs, "orders:k", clampMax)
	if v, err := c.Do(ctx, "LOCK", "orders:lock", 3000).Result(); err != redis.Nil {
		t.Errorf("LOCK of orders:lock, held by %v: %v, %v; want nil (still held)", lock[0], v, err)
	}
}

// TestNoWritesShebang: a script that declares no-writes runs as one Redis
// runs it (a write in a branch not taken does not matter), on a key left
// without expiry by a write outside scripts.
func TestNoWritesShebang(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	single := startRedis(t)
	p := startProxy(t, rs, clampHCL)
	c, s := p.Client(nil), single.Client()
	ctx := testCtx(t, 30*time.Second)
	const src = "#!lua flags=no-writes\nif ARGV[1] == 'x' then redis.call('SET', KEYS[1], '1') end\nreturn redis.call('GET', KEYS[1])"
	for _, cl := range []*redis.Client{c, s} {
		if err := cl.Incr(ctx, "nw:k").Err(); err != nil {
			t.Fatal(err)
		}
	}
	want, werr := s.Eval(ctx, src, []string{"nw:k"}, "y").Result()
	got, gerr := c.Eval(ctx, src, []string{"nw:k"}, "y").Result()
	if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
		t.Errorf("EVAL of a no-writes script: proxy %v, %v; one Redis %v, %v", got, gerr, want, werr)
	}
}

// TestLongExpiryHoldEndsWithItsValue: a lock given an expiry beyond
// max_ttl through one proxy (SET NX, then EXPIRE 3600 there) is held
// while it holds its value: deleted and taken again with a short ttl
// through another proxy, the new value expires when its own ttl says, not
// renewed by the first proxy's hold. (It was a plain SET: data is no
// longer held, docs/safety.md, "Locks and data".)
func TestLongExpiryHoldEndsWithItsValue(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	pa, pb := startProxy(t, rs, clampHCL), startProxy(t, rs, clampHCL)
	a, b := pa.Client(nil), pb.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	if ok, err := a.SetNX(ctx, "longexp", "first", 2*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET longexp first NX PX 2000 = %v, %v", ok, err)
	}
	if ok, err := a.Expire(ctx, "longexp", time.Hour).Result(); err != nil || !ok {
		t.Fatalf("EXPIRE longexp 3600 = %v, %v", ok, err)
	}
	if ttl, err := a.TTL(ctx, "longexp").Result(); err != nil || ttl < 3590*time.Second {
		t.Fatalf("TTL longexp = %v, %v; want about an hour (held)", ttl, err)
	}
	backendsBounded(ctx, t, rs, "longexp", clampMax)
	if err := b.Del(ctx, "longexp").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.SetNX(ctx, "longexp", "second", 2*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET longexp second NX PX 2000 = %v, %v", ok, err)
	}
	time.Sleep(3*2*time.Second + time.Second) // the 2 s ttl and three leases
	if n, err := b.Exists(ctx, "longexp").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS longexp = %v, %v: a 2 s lock taken after the hold's value was deleted is still there", n, err)
	}
}

// TestMathRandomAgreesAcrossBackends: a script by vote that writes what
// math.random draws writes the same value on every backend, even when
// one backend's generator has moved on (it ran another script: Redis 7
// does not reseed between scripts).
func TestMathRandomAgreesAcrossBackends(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 60*time.Second)
	if err := rs[0].Client().Eval(ctx, "return math.random(1, 100)", nil).Err(); err != nil {
		t.Fatal(err)
	}
	src := "redis.call('HSET', KEYS[1], 'id', tostring(math.random(1, 1000000000))) return 'done'"
	if err := p.Client(nil).Eval(ctx, src, []string{"rnd"}).Err(); err != nil {
		t.Fatalf("EVAL: %v", err)
	}
	vals := map[string]bool{}
	for _, b := range rs {
		vals[b.Client().HGet(ctx, "rnd", "id").Val()] = true
	}
	if len(vals) != 1 {
		t.Fatalf("backends hold %d different values: %v", len(vals), vals)
	}
}
