package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// builtLock takes a lock on a key it builds from its declared key
// ('{' .. KEYS[1] .. '}'), with a ttl of ARGV[2] ms, or renews it for its
// owner: 1 taken, 0 held by another. It runs by vote.
const builtLock = `local k = '{' .. KEYS[1] .. '}'
local v = redis.call('GET', k)
if v == false then redis.call('SET', k, ARGV[1], 'PX', ARGV[2]) return 1 end
if v == ARGV[1] then redis.call('PEXPIRE', k, ARGV[2]) return 1 end
return 0`

// TestClampBuiltKeys: a script by vote that writes a key it builds from
// its declared key, with a ttl of ten minutes: every backend's copy of the
// built key carries at most max_ttl, the key is held (read through the
// proxy, its ttl counts down from ten minutes), and after a majority of
// backends is killed and restarted empty a second client polling the same
// script never takes it while the first holds it.
func TestClampBuiltKeys(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	a, b := p.Client(nil), p.Client(nil)
	ctx := testCtx(t, 90*time.Second)
	const key, built = "clamp:built", "{clamp:built}"

	if n, err := a.Eval(ctx, builtLock, []string{key}, "A", "600000").Int(); err != nil || n != 1 {
		t.Fatalf("A's lock = %v, %v", n, err)
	}
	backendsBounded(ctx, t, rs, built, clampMax)
	if ttl, err := a.PTTL(ctx, built).Result(); err != nil || ttl < 590*time.Second {
		t.Fatalf("PTTL %s through the proxy = %v, %v; want about 600s", built, ttl, err)
	}

	rs[0].Restart()
	rs[1].Restart()
	restarted := time.Now()
	seen := ""
	for time.Since(restarted) < clampMax+3*2*time.Second { // the quarantine and three leases
		n, err := b.Eval(ctx, builtLock, []string{key}, "B", "600000").Int()
		if last := fmt.Sprint(n, err); last != seen {
			seen = last
			t.Logf("%v after the restart: B's try = %s", time.Since(restarted).Round(time.Millisecond), last)
		}
		if err == nil && n == 1 {
			t.Fatalf("B took the lock %v after the restart, within A's 600 s", time.Since(restarted).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond) // pacing the tries
	}
	backendsBounded(ctx, t, rs, built, clampMax)
	if v, err := a.Get(ctx, built).Result(); err != nil || v != "A" {
		t.Fatalf("GET %s = %q, %v; want A's", built, v, err)
	}
}

// TestClampLongBuiltKey: a key built from a declared key and an argument,
// longer together than any one argument may be (4,200 bytes here; a
// script's string.rep makes any length), is bounded and held like a short
// one on every backend (the client cannot name it: it is longer than
// max_key_bytes): before, the shadow noted only arguments up to 4 KiB,
// and every backend kept the ten-minute copy.
func TestClampLongBuiltKey(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 30*time.Second)
	key, suffix := strings.Repeat("k", 200), strings.Repeat("x", 4000)
	const script = `redis.call('SET', KEYS[1] .. ARGV[1], 'owner', 'NX', 'PX', ARGV[2]) return 1`
	if n, err := c.Eval(ctx, script, []string{key}, suffix, "600000").Int(); err != nil || n != 1 {
		t.Fatalf("EVAL = %v, %v", n, err)
	}
	backendsBounded(ctx, t, rs, key+suffix, clampMax)
}
