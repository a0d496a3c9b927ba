package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// The clamp of scripts by vote (docs/compatibility.md, "Expiries of
// scripts by vote"): no copy a script leaves on a backend carries more
// than max_ttl; what the script wanted is held by the proxy and answered.

// clampHCL: a lease of 2 s on the copies, a max_ttl of 3 s.
const clampHCL = `default_ttl = "2s"
max_ttl = "3s"
health_interval = "200ms"`

// clampMax is clampHCL's max_ttl.
const clampMax = 3 * time.Second

// hashLock takes a lock as a hash {owner = ARGV[1]} with a ttl of ARGV[2]
// ms, or renews it for its owner: 1 taken, 0 held by another. Not a
// script the proxy recognises: it runs by vote.
const hashLock = `if redis.call('EXISTS', KEYS[1]) == 0 then
	redis.call('HSET', KEYS[1], 'owner', ARGV[1])
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
return 0`

// backendsBounded checks that every backend's copy of key carries an
// expiry within bound (or is absent).
func backendsBounded(ctx context.Context, t *testing.T, rs []*redisProc, key string, bound time.Duration) {
	t.Helper()
	for i, r := range rs {
		ttl, err := r.Client().PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %s on backend %d: %v", key, i, err)
		}
		if ttl == -1 || ttl > bound {
			t.Fatalf("backend %d: PTTL %s = %v, want within max_ttl %v", i, key, ttl, bound)
		}
	}
}

// backendsAsAsked checks that every backend's copy of key carries the
// expiry the client gave (docs/safety.md, "Locks and data"): none when want
// is negative, else within a second below want. Data is stored as asked.
func backendsAsAsked(ctx context.Context, t *testing.T, rs []*redisProc, key string, want time.Duration) {
	t.Helper()
	for i, r := range rs {
		ttl, err := r.Client().PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %s on backend %d: %v", key, i, err)
		}
		if want < 0 && ttl != -1 || want >= 0 && (ttl > want || ttl < want-time.Second) {
			t.Fatalf("backend %d: PTTL %s = %v, want %v as the client gave it", i, key, ttl, want)
		}
	}
}

// backendsAsOneRedis checks that every backend's copy of key carries what
// one Redis (ref) given the same commands carries, or, for a key a script
// by vote left (a lock's rule), at most bound.
func backendsAsOneRedis(ctx context.Context, t *testing.T, rs []*redisProc, ref *redis.Client, key string, bound time.Duration) {
	t.Helper()
	want, err := ref.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatalf("PTTL %s on one Redis: %v", key, err)
	}
	for i, r := range rs {
		ttl, err := r.Client().PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %s on backend %d: %v", key, i, err)
		}
		asked := ttl == want || want > 0 && ttl > 0 && ttl <= want+2*time.Second && ttl >= want-2*time.Second
		if !asked && (ttl == -1 || ttl > bound) {
			t.Fatalf("backend %d: PTTL %s = %v; one Redis %v, a lock's copy at most %v", i, key, ttl, want, bound)
		}
	}
}

// TestClampVoteLockAcrossRestart: a hash lock with a 600 s lease, taken by
// a script the proxy runs by vote, then a majority of backends killed
// with -9 and restarted empty. Before the clamp the survivor kept a 600 s
// copy; clamped, every copy on every backend carries at most max_ttl,
// before and after the restart, while the proxy answers the 600 s.
func TestClampVoteLockAcrossRestart(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	a := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	const key = "clamp:hashlock"

	takeHashLock(ctx, t, p, a, key)
	rs[0].Restart()
	rs[1].Restart()
	restarted := time.Now()
	for time.Since(restarted) < clampMax+2*time.Second { // the quarantine and a lease
		backendsBounded(ctx, t, rs, key, clampMax)
		time.Sleep(100 * time.Millisecond) // pacing the polls
	}
}

// TestClampVoteLockNoSecondHolder: as above, and a second client tries the
// same lock until the quarantine and two leases have passed: it must not
// be granted while the first client holds its 600 s.
//
// The clamp bounds the copies; the hold's renewal writes the key back
// onto the backends that restarted empty before they vote again
// (redlock.Repair).
func TestClampVoteLockNoSecondHolder(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	a, b := p.Client(nil), p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	const key = "clamp:hashlock"

	takeHashLock(ctx, t, p, a, key)
	rs[0].Restart()
	rs[1].Restart()
	restarted := time.Now()
	for time.Since(restarted) < clampMax+4*time.Second+time.Second { // the quarantine and two leases
		if n, err := b.Eval(ctx, hashLock, []string{key}, "B", "600000").Int(); err == nil && n == 1 {
			t.Fatalf("B took the lock %v after the restart, within A's 600 s", time.Since(restarted).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond) // pacing the polls
	}
}

// takeHashLock takes the hash lock for "A" with a 600 s lease through p,
// and checks it ran by vote, answers its 600 s and is clamped.
func takeHashLock(ctx context.Context, t *testing.T, p *proxyProc, c *redis.Client, key string) {
	t.Helper()
	if n, err := c.Eval(ctx, hashLock, []string{key}, "A", "600000").Int(); err != nil || n != 1 {
		t.Fatalf("hash lock by A = %v, %v; want 1", n, err)
	}
	if !strings.Contains(p.Log(), "script runs by vote") {
		t.Fatalf("the hash lock is not run by vote:\n%s", p.Log())
	}
	if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl < 590*time.Second {
		t.Fatalf("PTTL %s through the proxy = %v, %v; want about 600 s", key, ttl, err)
	}
}

// TestClampScriptWithoutExpiry: a counter a script keeps without expiry,
// written after the script read it (a lock's write), is clamped on every
// backend, held by the proxy (TTL -1) and still there three leases later;
// an INCR by script that leaves its expiry alone does not end the hold.
func TestClampScriptWithoutExpiry(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	const key = "clamp:counter"
	incr := "return redis.call('INCR', KEYS[1])"
	// A count that depends on what the key held: a lock's write.
	count := "local n = (tonumber(redis.call('GET', KEYS[1])) or 0) + 1 redis.call('SET', KEYS[1], n) return n"

	if n, err := c.Eval(ctx, count, []string{key}).Int(); err != nil || n != 1 {
		t.Fatalf("count by script = %v, %v; want 1", n, err)
	}
	backendsBounded(ctx, t, rs, key, clampMax)
	time.Sleep(3 * time.Second) // past the copies' lease: the proxy renews them
	if n, err := c.Eval(ctx, incr, []string{key}).Int(); err != nil || n != 2 {
		t.Fatalf("second INCR by script = %v, %v; want 2", n, err)
	}
	time.Sleep(4 * time.Second) // three leases since the first
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "2" {
		t.Fatalf("GET %s after three leases = %q, %v; want 2", key, v, err)
	}
	if ttl, err := c.TTL(ctx, key).Result(); err != nil || ttl != -1 {
		t.Fatalf("TTL %s = %v, %v; want -1", key, ttl, err)
	}
	backendsBounded(ctx, t, rs, key, clampMax)
}

// TestClampRepliesAsRedis: the clamp leaves what the client sees as one
// Redis gives it: replies, error replies, the text of a script's error
// (with its line and SHA1), EVALSHA of the client's SHA1; and a script
// that errors half-way after setting a long expiry is clamped too, and
// held to the expiry it set.
func TestClampRepliesAsRedis(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	single := startRedis(t)
	p := startProxy(t, rs, clampHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	const key = "clamp:half"

	for _, src := range []string{
		"redis.call('SET', KEYS[1], 'v', 'NX', 'PX', 600000)\nerror('half way')",
		"redis.call('SET', KEYS[1], 'v', 'NX', 'PX', 600000) return redis.call('INCR', KEYS[1])",
		"return redis.error_reply('MY error')",
		"return redis.status_reply('FINE')",
		"redis.call('SET', KEYS[1], 'v', 'NX') return nil",
		"return {1, false, 'x', {2}}",
	} {
		want, wantErr := single.Client().Eval(ctx, src, []string{key}).Result()
		got, err := c.Eval(ctx, src, []string{key}).Result()
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || !equalReplies(got, want) {
			t.Errorf("EVAL %q through the proxy = %#v, %v; one Redis answers %#v, %v", src, got, err, want, wantErr)
		}
		sha, _ := single.Client().ScriptLoad(ctx, src).Result()
		got, err = c.EvalSha(ctx, sha, []string{key}).Result()
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || !equalReplies(got, want) {
			t.Errorf("EVALSHA of %q through the proxy = %#v, %v; one Redis answers %#v, %v", src, got, err, want, wantErr)
		}
		backendsBounded(ctx, t, rs, key, clampMax)
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatalf("DEL %s: %v", key, err)
		}
	}

	// Scripts that try to hide the key they write from the clamp are
	// refused, or clamped all the same.
	for _, src := range []string{
		"redis.call('SET', KEYS[1], 'v', 'NX') KEYS[1] = 'elsewhere' return 1",
		"local t = KEYS redis.call('SET', t[1], 'v', 'NX') t[1] = 'elsewhere' return 1",
		"redis.call('SET', KEYS[1], 'v', 'NX') table.remove(KEYS, 1) return 1",
		"local k = KEYS[1] KEYS = {} redis.call('SET', k, 'v', 'NX') return 1",
	} {
		err := c.Eval(ctx, src, []string{key}).Err()
		t.Logf("EVAL %q: %v", src, err)
		backendsBounded(ctx, t, rs, key, clampMax)
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatalf("DEL %s: %v", key, err)
		}
	}

	half := "redis.call('SET', KEYS[1], 'v', 'NX', 'PX', 600000)\nerror('half way')"
	if err := c.Eval(ctx, half, []string{key}).Err(); err == nil || !strings.Contains(err.Error(), "half way") {
		t.Fatalf("EVAL of a script that errs half-way = %v; want its error", err)
	}
	backendsBounded(ctx, t, rs, key, clampMax)
	if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl < 590*time.Second {
		t.Fatalf("PTTL %s through the proxy = %v, %v; want about 600 s", key, ttl, err)
	}
	time.Sleep(6 * time.Second) // three leases
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET %s after three leases = %q, %v; want v (held to its 600 s)", key, v, err)
	}
	backendsBounded(ctx, t, rs, key, clampMax)
	// A script that bounds it ends the hold: it expires by itself.
	if err := c.Eval(ctx, "return redis.call('PEXPIRE', KEYS[1], 1000)", []string{key}).Err(); err != nil {
		t.Fatalf("PEXPIRE 1000 by script: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the key bounded by a script to expire", func() bool {
		n, err := c.Exists(ctx, key).Result()
		return err == nil && n == 0
	})
}

// equalReplies compares two go-redis replies, errors inside arrays by text.
func equalReplies(a, b any) bool {
	switch a := a.(type) {
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !equalReplies(a[i], bs[i]) {
				return false
			}
		}
		return true
	case error:
		be, ok := b.(error)
		return ok && a.Error() == be.Error()
	case nil:
		return b == nil
	}
	return a == b
}

// longAcquireScript and longExtendScript are lock scripts the proxy
// recognises (all keys or none, node-redlock's convention; a
// compare-and-pexpire).
const (
	longAcquireScript = `for _, k in ipairs(KEYS) do
  if redis.call("EXISTS", k) == 1 then return 0 end
end
for _, k in ipairs(KEYS) do
  redis.call("SET", k, ARGV[1], "PX", ARGV[2])
end
return #KEYS`
	longExtendScript = `if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('pexpire', KEYS[1], ARGV[2])`
)

// scriptReplyIs is cmd's error, or one if its reply is not want.
func scriptReplyIs(cmd *redis.Cmd, want int64) error {
	n, err := cmd.Int64()
	if err == nil && n != want {
		err = fmt.Errorf("script answered %d, want %d", n, want)
	}
	return err
}

// TestLongLockExpiriesHeld: a lock given an expiry beyond max_ttl (SET …
// NX PX, SET … NX EXAT, PEXPIRE of a lock taken here, and recognised lock
// scripts: an acquire, an extend) is written with the lease and held to
// the deadline the client asked for: PTTL answers the long ttl counting
// down, every backend's copy stays within max_ttl, the key outlives three
// leases, a second SET NX of the lock is refused all along, and an expiry
// within max_ttl (SET … XX PX of its token) ends the hold. Data given the
// same long expiries (SET … PX, SET … EXAT, SETEX, PEXPIRE of a plain
// SET) is stored on every backend with exactly that expiry, not held
// (docs/safety.md, "Locks and data"); before, it was bounded and held as
// a lock.
func TestLongLockExpiriesHeld(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	at := time.Now().Add(10 * time.Minute).Unix()
	locks := map[string]func() error{
		"long:lock": func() error {
			return c.SetArgs(ctx, "long:lock", "tok", redis.SetArgs{Mode: "NX", TTL: 600 * time.Second}).Err()
		},
		"long:lockexat": func() error { return c.Do(ctx, "SET", "long:lockexat", "tok", "NX", "EXAT", at).Err() },
		"long:lockpexpire": func() error {
			if ok, err := c.SetNX(ctx, "long:lockpexpire", "tok", 2*time.Second).Result(); err != nil || !ok {
				return fmt.Errorf("SET NX PX 2000 = %v, %v", ok, err)
			}
			return c.PExpire(ctx, "long:lockpexpire", 600*time.Second).Err()
		},
		// Recognised lock scripts: an acquire, and an extend of a lock
		// taken within max_ttl.
		"long:script": func() error {
			return scriptReplyIs(c.Eval(ctx, longAcquireScript, []string{"long:script"}, "tok", 600000), 1)
		},
		"long:extended": func() error {
			if err := scriptReplyIs(c.Eval(ctx, longAcquireScript, []string{"long:extended"}, "tok", 2000), 1); err != nil {
				return err
			}
			return scriptReplyIs(c.Eval(ctx, longExtendScript, []string{"long:extended"}, "tok", 600000), 1)
		},
	}
	data := map[string]func() error{
		"long:set":   func() error { return c.Set(ctx, "long:set", "v", 600*time.Second).Err() },
		"long:exat":  func() error { return c.Do(ctx, "SET", "long:exat", "v", "EXAT", at).Err() },
		"long:setex": func() error { return c.SetEx(ctx, "long:setex", "v", 600*time.Second).Err() },
		"long:pexpire": func() error {
			if err := c.Set(ctx, "long:pexpire", "v", 2*time.Second).Err(); err != nil {
				return err
			}
			return c.PExpire(ctx, "long:pexpire", 600*time.Second).Err()
		},
	}
	// dataAsAsked: every backend's copy of a data key carries what the
	// proxy answers (about 600 s counting down), beyond max_ttl.
	dataAsAsked := func(key string) {
		t.Helper()
		want, err := c.PTTL(ctx, key).Result()
		if err != nil || want < 580*time.Second || want > 600*time.Second {
			t.Fatalf("PTTL %s = %v, %v; want about 600 s", key, want, err)
		}
		for i, r := range rs {
			ttl, err := r.Client().PTTL(ctx, key).Result()
			if err != nil || ttl > want+time.Second || ttl < want-2*time.Second {
				t.Fatalf("backend %d: PTTL %s = %v, %v; want %v as the client gave it", i, key, ttl, err, want)
			}
		}
	}
	for key, write := range locks {
		if err := write(); err != nil {
			t.Fatalf("write of %s: %v", key, err)
		}
		if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl < 590*time.Second || ttl > 600*time.Second {
			t.Fatalf("PTTL %s = %v, %v; want about 600 s", key, ttl, err)
		}
		backendsBounded(ctx, t, rs, key, clampMax)
	}
	for key, write := range data {
		if err := write(); err != nil {
			t.Fatalf("write of %s: %v", key, err)
		}
		dataAsAsked(key)
	}
	first, _ := c.PTTL(ctx, "long:lock").Result()
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); { // three leases
		if ok, err := c.SetNX(ctx, "long:lock", "other", 600*time.Second).Result(); err != nil || ok {
			t.Fatalf("a second SET NX of the held lock = %v, %v; want refused", ok, err)
		}
		time.Sleep(200 * time.Millisecond) // pacing the polls
	}
	for key := range locks {
		if n, err := c.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("EXISTS %s after three leases = %v, %v; want 1", key, n, err)
		}
		backendsBounded(ctx, t, rs, key, clampMax)
	}
	for key := range data {
		dataAsAsked(key)
	}
	if ttl, err := c.PTTL(ctx, "long:lock").Result(); err != nil || ttl >= first || ttl < first-10*time.Second {
		t.Fatalf("PTTL long:lock = %v, %v after 6 s; want counting down from %v", ttl, err, first)
	}
	// An expiry within max_ttl of the lock's token ends the hold.
	if err := c.Do(ctx, "SET", "long:lock", "tok", "XX", "PX", "1000").Err(); err != nil {
		t.Fatalf("SET long:lock tok XX PX 1000: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "long:lock, bounded again, to expire", func() bool {
		n, err := c.Exists(ctx, "long:lock").Result()
		return err == nil && n == 0
	})
}
