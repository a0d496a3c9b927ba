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

// tierRenewed is what a proxy logs when it renewed holds another proxy
// made (lease/holds.go).
const tierRenewed = "renewed holds made through other proxies"

// holdsHCL: a small default_ttl (the lease of a hold's copies) and
// max_ttl keep the runs short.
const holdsHCL = `default_ttl = "2s"
max_ttl = "4s"`

// TestHoldOutlivesItsProxy: a hold without expiry taken as redis-py's
// Lock(timeout=None) takes it (SET k v NX) through proxy A survives A's
// stop, by SIGTERM (a routine restart) and by kill -9: a second client
// polling SET k v2 NX through proxy B for three default_ttl never
// acquires, and the key still holds A's value, without expiry: B renews
// it from the record once its lease runs low (nothing is handed over),
// and logs it. The hold ends when its holder releases it (through B):
// then B's client acquires.
func TestHoldOutlivesItsProxy(t *testing.T) {
	t.Parallel()
	for _, stop := range []string{"sigterm", "kill"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			rs := startCluster(t, 3)
			a := startProxy(t, rs, holdsHCL)
			b := startProxy(t, rs, holdsHCL)
			ctx := testCtx(t, 60*time.Second)
			ca, cb := a.Client(nil), b.Client(nil)
			if ok, err := ca.SetNX(ctx, "held", "first", 0).Result(); err != nil || !ok {
				t.Fatalf("SET held first NX through A = %v, %v", ok, err)
			}
			if stop == "sigterm" {
				a.terminate()
			} else {
				a.kill()
			}
			took := neverAcquired(t, ctx, cb, "held", 6*time.Second, b) // three default_ttl
			t.Logf("B took the hold over %v after A stopped", took)
			heldWithoutExpiry(t, ctx, cb, "held", "first")
			if !strings.Contains(b.Log(), tierRenewed) {
				t.Errorf("B does not log %q:\n%s", tierRenewed, b.Log())
			}
			releaseThenAcquire(t, ctx, cb, "held", "first")
		})
	}
}

// TestHoldResumesAfterRestart: with a single proxy, a hold without expiry
// survives a kill -9 and a restart of that proxy (a new member id): the
// restarted proxy renews the holds of its former self from the record. default_ttl 4 s gives the restart room on a loaded machine.
func TestHoldResumesAfterRestart(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	tier := startTier(t, rs, 1, `default_ttl = "4s"
max_ttl = "8s"`)
	p := tier[0]
	ctx := testCtx(t, 90*time.Second)
	c := p.proc().Client(nil)
	if ok, err := c.SetNX(ctx, "held", "first", 0).Result(); err != nil || !ok {
		t.Fatalf("SET held first NX = %v, %v", ok, err)
	}
	p.kill()
	p.restart()
	c2 := p.proc().Client(nil)
	took := neverAcquired(t, ctx, c2, "held", 12*time.Second, p.proc()) // three default_ttl
	t.Logf("the restarted proxy took the hold over %v after its start", took)
	heldWithoutExpiry(t, ctx, c2, "held", "first")
	if !strings.Contains(p.proc().Log(), tierRenewed) {
		t.Errorf("the restarted proxy does not log renewing the hold:\n%s", p.proc().Log())
	}
	releaseThenAcquire(t, ctx, c2, "held", "first")
}

// TestHoldSurvivesRestartsInTurn: the proxies of a tier of two stop in
// turn while one hold lives: A (its maker) is stopped by SIGTERM and B
// renews it; A is started again; B is killed (-9) and the new A renews
// it. Polled through whichever proxy runs, SET NX never acquires,
// and the hold ends when released.
func TestHoldSurvivesRestartsInTurn(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	tier := startTier(t, rs, 2, holdsHCL)
	a, b := tier[0], tier[1]
	ctx := testCtx(t, 90*time.Second)
	if ok, err := a.proc().Client(nil).SetNX(ctx, "held", "first", 0).Result(); err != nil || !ok {
		t.Fatalf("SET held first NX through A = %v, %v", ok, err)
	}
	a.proc().terminate()
	neverAcquired(t, ctx, b.proc().Client(nil), "held", 4*time.Second, b.proc())
	a.restart()
	b.kill()
	ca := a.proc().Client(nil)
	neverAcquired(t, ctx, ca, "held", 6*time.Second, a.proc()) // three default_ttl
	heldWithoutExpiry(t, ctx, ca, "held", "first")
	if !strings.Contains(a.proc().Log(), tierRenewed) {
		t.Errorf("the restarted A does not log renewing the hold:\n%s", a.proc().Log())
	}
	releaseThenAcquire(t, ctx, ca, "held", "first")
}

// TestHoldEndsWhenEveryProxyIsDown: as docs/safety.md says, a hold whose
// every proxy is down longer than its lease ends: the copies expire, the
// proxy started again deletes the stale field before it serves, and a
// client acquires the key.
func TestHoldEndsWhenEveryProxyIsDown(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	tier := startTier(t, rs, 1, holdsHCL)
	p := tier[0]
	ctx := testCtx(t, 60*time.Second)
	if ok, err := p.proc().Client(nil).SetNX(ctx, "held", "first", 0).Result(); err != nil || !ok {
		t.Fatalf("SET held first NX = %v, %v", ok, err)
	}
	p.kill()
	testkit.Eventually(t, 10*time.Second, "the copies expired on every backend", func() bool {
		for _, r := range rs {
			if r.Client().Exists(ctx, "held").Val() != 0 {
				return false
			}
		}
		return true
	})
	p.restart()
	testkit.Eventually(t, 10*time.Second, "the field of the expired hold deleted", func() bool {
		for _, r := range rs {
			if r.Client().HExists(ctx, "redlock-proxy:holds:redlock", "held").Val() {
				return false
			}
		}
		return true
	})
	if ok, err := p.proc().Client(nil).SetNX(ctx, "held", "second", 0).Result(); err != nil || !ok {
		t.Fatalf("SET held second NX after the hold ended = %v, %v", ok, err)
	}
}

// TestHoldRecordFollowsTheKey: a held key released, overwritten with an
// expiry or given one, through its proxy or another, leaves the record,
// and no proxy renews it after: a key given an expiry through A or B
// expires although A held it without expiry, and a released key is free.
func TestHoldRecordFollowsTheKey(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	a := startProxy(t, rs, holdsHCL)
	b := startProxy(t, rs, holdsHCL)
	ctx := testCtx(t, 60*time.Second)
	ca, cb := a.Client(nil), b.Client(nil)
	for _, k := range []string{"released", "overwritten", "expired", "expiredByB"} {
		if ok, err := ca.SetNX(ctx, k, "v", 0).Result(); err != nil || !ok {
			t.Fatalf("SET %s v NX through A = %v, %v", k, ok, err)
		}
	}
	record := rs[0].Client()
	const holds = "redlock-proxy:holds:redlock"
	testkit.Eventually(t, 10*time.Second, "four holds in the record", func() bool {
		return record.HLen(ctx, holds).Val() == 4
	})
	// An expiry given through B ends A's hold at once, whether or not B's
	// rounds saw it: the copies' expiry is no longer the hold's
	// stamp, so A's renewal leaves them and the next scan drops the field.
	if err := cb.PExpire(ctx, "expiredByB", 3*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := cb.Eval(ctx, redisPyRelease, []string{"released"}, "v").Int(); err != nil || n != 1 {
		t.Fatalf("release through B = %v, %v", n, err)
	}
	if err := cb.Set(ctx, "overwritten", "w", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := ca.Expire(ctx, "expired", time.Second).Result(); err != nil || !ok {
		t.Fatalf("EXPIRE expired 1 through A = %v, %v", ok, err)
	}
	testkit.Eventually(t, 15*time.Second, "the overwritten and the expired keys gone", func() bool {
		n, err := cb.Exists(ctx, "overwritten", "expired", "expiredByB").Result()
		return err == nil && n == 0
	})
	testkit.Eventually(t, 10*time.Second, "the record empty on every backend", func() bool {
		for _, r := range rs {
			if r.Client().HLen(ctx, holds).Val() != 0 {
				return false
			}
		}
		return true
	})
	if ok, err := cb.SetNX(ctx, "released", "mine", 0).Result(); err != nil || !ok {
		t.Fatalf("SET released mine NX through B = %v, %v", ok, err)
	}
}

// redisPyRelease is redis-py's Lock release script.
const redisPyRelease = `local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
redis.call('del', KEYS[1])
return 1`

// neverAcquired polls SET key NX through c for d: it must never succeed.
// It returns when, about, the log of taker first said it took holds over
// (-1: never).
func neverAcquired(t *testing.T, ctx context.Context, c *redis.Client, key string, d time.Duration, taker *proxyProc) time.Duration {
	t.Helper()
	start := time.Now()
	took := time.Duration(-1)
	refused := 0
	for time.Since(start) < d {
		if took < 0 && strings.Contains(taker.Log(), tierRenewed) {
			took = time.Since(start).Round(10 * time.Millisecond)
		}
		ok, err := c.SetNX(ctx, key, "second", 0).Result()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "NOQUORUM"):
			// No answer (backends slow on a loaded machine): not taken.
		case err != nil || ok:
			t.Fatalf("SET %s second NX, %v after the proxy stopped = %v, %v: the hold died with its proxy",
				key, time.Since(start).Round(time.Millisecond), ok, err)
		default:
			refused++
		}
		time.Sleep(100 * time.Millisecond) // pacing the polls
	}
	if refused == 0 {
		t.Fatalf("SET %s second NX was never answered in %v", key, d)
	}
	return took
}

// heldWithoutExpiry checks that key holds value with no expiry as clients see it.
func heldWithoutExpiry(t *testing.T, ctx context.Context, c *redis.Client, key, value string) {
	t.Helper()
	if v, err := c.Get(ctx, key).Result(); err != nil || v != value {
		t.Fatalf("GET %s = %q, %v; want %s", key, v, err, value)
	}
	if ttl, err := c.TTL(ctx, key).Result(); err != nil || ttl != -1 {
		t.Fatalf("TTL %s = %v, %v; want -1 (a hold without expiry)", key, ttl, err)
	}
}

// releaseThenAcquire releases the hold of key by value as redis-py does,
// through c; then another value acquires key through c.
func releaseThenAcquire(t *testing.T, ctx context.Context, c *redis.Client, key, value string) {
	t.Helper()
	if n, err := c.Eval(ctx, redisPyRelease, []string{key}, value).Int(); err != nil || n != 1 {
		t.Fatalf("release of %s = %v, %v; want 1", key, n, err)
	}
	if ok, err := c.SetNX(ctx, key, "second", 0).Result(); err != nil || !ok {
		t.Fatalf("SET %s second NX after the release = %v, %v", key, ok, err)
	}
}

// TestHoldRecordPagesOnRedis: a proxy holding thousands of keys reads
// the record a page at a time: no call of its renewal rounds reads it
// whole (one such call over 1,600 holds took 60 ms on a backend, past
// node_timeout, and every backend was marked down).
func TestHoldRecordPagesOnRedis(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	// Leases of 30 s (the default): with holdsHCL's 2 s, renewing 2,000
	// keys would take more than this machine has.
	p := startProxy(t, rs, `default_ttl = "30s"`)
	ctx := testCtx(t, 90*time.Second)
	c := p.Client(nil)
	const n = 2000
	for i := 0; i < n; i += 50 {
		pipe := c.Pipeline()
		for j := i; j < i+50; j++ {
			pipe.SetNX(ctx, fmt.Sprintf("held:%d", j), "v", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("SET NX without expiry: %v", err)
		}
	}
	const holds = "redlock-proxy:holds:redlock"
	b := rs[0].Client()
	testkit.Eventually(t, 20*time.Second, "every hold in the record", func() bool {
		return b.HLen(ctx, holds).Val() == n
	})
	for _, cmd := range [][]any{{"CONFIG", "SET", "slowlog-log-slower-than", "0"}, {"CONFIG", "SET", "slowlog-max-len", "100000"}, {"SLOWLOG", "RESET"}} {
		if err := b.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A scan's call: EVALSHA sha 2, the record and its stamps, and one
	// argument, the cursor.
	var pages, longest int64
	testkit.Eventually(t, 20*time.Second, "a renewal round's scan, to its last page", func() bool {
		pages, longest = 0, 0
		done := false
		for _, e := range b.SlowLogGet(ctx, -1).Val() {
			if len(e.Args) == 6 && (e.Args[0] == "EVALSHA" || e.Args[0] == "EVAL") && e.Args[3] == holds {
				pages++
				longest = max(longest, e.Duration.Microseconds())
				done = done || e.Args[5] != "0"
			}
		}
		return done && pages >= n/100
	})
	t.Logf("%d pages of the record read, the longest in %d µs", pages, longest)
	if err := b.Do(ctx, "CONFIG", "SET", "slowlog-log-slower-than", "10000").Err(); err != nil {
		t.Fatal(err)
	}
}

// recordSeen waits until each client's proxy lists every key as a hold
// (LOCKADMIN WHO: hold 1), as its renewal rounds read them from the
// record: a bounded poll, where a fixed sleep of a few rounds could pass
// before a loaded machine ran one.
func recordSeen(ctx context.Context, t *testing.T, clients []*redis.Client, keys ...string) {
	t.Helper()
	for _, c := range clients {
		for _, k := range keys {
			testkit.Eventually(t, 20*time.Second, "a proxy's rounds see the hold of "+k, func() bool {
				v, err := c.Do(ctx, "LOCKADMIN", "WHO", k).Result()
				if err != nil {
					return false
				}
				switch m := v.(type) {
				case map[any]any: // RESP3
					return m["hold"] == int64(1)
				case []any: // RESP2: field, value, …
					for i := 0; i+1 < len(m); i += 2 {
						if m[i] == "hold" {
							return m[i+1] == int64(1)
						}
					}
				}
				return false
			})
		}
	}
}
