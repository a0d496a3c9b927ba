package tests

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestInteropGoRedisSetNX: a hand-written go-redis lock — SetNX to
// acquire (go-redis sends `set k v ex 8 nx`), SET … IFEQ to renew and
// DELIFEQ / DELEX IFEQ to release — under contention.
func TestInteropGoRedisSetNX(t *testing.T) {
	t.Parallel()
	_, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)
	c := p.Client(nil)

	const key = "goredis:lock"
	ok, err := c.SetNX(ctx, key, "a", 8*time.Second).Result()
	if err != nil || !ok {
		t.Fatalf("SetNX(%s, a, 8s) [set k v ex 8 nx] = %v, %v; want true", key, ok, err)
	}
	requireQuorum(ctx, t, bs, key, "a", "after SetNX")
	ttls := backendPTTLs(ctx, t, bs, key)
	if n := countAbove(ttls, 7*time.Second); n < interopQuorum {
		t.Fatalf("after SetNX with 8s, backend ttls are %v; want at least %d above 7s", ttls, interopQuorum)
	}
	for _, d := range ttls {
		if d > 8*time.Second {
			t.Fatalf("after SetNX with 8s, a backend ttl is %v, more than 8s", d)
		}
	}
	if ok, err := c.SetNX(ctx, key, "b", 8*time.Second).Result(); err != nil || ok {
		t.Fatalf("SetNX on a held key = %v, %v; want false", ok, err)
	}
	if got, err := c.Get(ctx, key).Result(); err != nil || got != "a" {
		t.Fatalf("GET %s = %q, %v; want a", key, got, err)
	}
	if d, err := c.PTTL(ctx, key).Result(); err != nil || d <= 0 || d > 8*time.Second {
		t.Fatalf("PTTL %s = %v, %v; want in (0, 8s]", key, d, err)
	}

	// Renew: SET k v PX ms IFEQ v.
	if err := c.Do(ctx, "SET", key, "a", "PX", 20000, "IFEQ", "b").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("SET %s a PX 20000 IFEQ b (wrong owner) = %v, want null", key, err)
	}
	if got, err := c.Do(ctx, "SET", key, "a", "PX", 20000, "IFEQ", "a").Text(); err != nil || got != "OK" {
		t.Fatalf("SET %s a PX 20000 IFEQ a = %q, %v; want OK", key, got, err)
	}
	if n := countAbove(backendPTTLs(ctx, t, bs, key), 10*time.Second); n < interopQuorum {
		t.Fatalf("after SET IFEQ with PX 20000, %d backends have a ttl above 10s, want at least %d", n, interopQuorum)
	}

	// Release: DELIFEQ with the wrong value 0, the right one 1, again 0.
	if n, err := c.Do(ctx, "DELIFEQ", key, "b").Int64(); err != nil || n != 0 {
		t.Fatalf("DELIFEQ %s b (wrong owner) = %d, %v; want 0", key, n, err)
	}
	requireQuorum(ctx, t, bs, key, "a", "after DELIFEQ with the wrong value")
	if n, err := c.Do(ctx, "DELIFEQ", key, "a").Int64(); err != nil || n != 1 {
		t.Fatalf("DELIFEQ %s a = %d, %v; want 1", key, n, err)
	}
	requireNowhere(ctx, t, bs, key, "a", "after DELIFEQ")
	if n, err := c.Do(ctx, "DELIFEQ", key, "a").Int64(); err != nil || n != 0 {
		t.Fatalf("second DELIFEQ %s a = %d, %v; want 0", key, n, err)
	}

	// SetNX without expiry sends SETNX: the proxy applies default_ttl (30s).
	if ok, err := c.SetNX(ctx, key, "c", 0).Result(); err != nil || !ok {
		t.Fatalf("SetNX(%s, c, 0) [setnx k v] = %v, %v; want true", key, ok, err)
	}
	ttls = backendPTTLs(ctx, t, bs, key)
	if n := countAbove(ttls, 25*time.Second); n < interopQuorum {
		t.Fatalf("after SETNX, backend ttls are %v; want the 30s default_ttl on at least %d", ttls, interopQuorum)
	}
	if n, err := c.Do(ctx, "DELEX", key, "IFEQ", "x").Int64(); err != nil || n != 0 {
		t.Fatalf("DELEX %s IFEQ x (wrong owner) = %d, %v; want 0", key, n, err)
	}
	if n, err := c.Do(ctx, "DELEX", key, "IFEQ", "c").Int64(); err != nil || n != 1 {
		t.Fatalf("DELEX %s IFEQ c = %d, %v; want 1", key, n, err)
	}
	requireNowhere(ctx, t, bs, key, "c", "after DELEX IFEQ")

	// Release after expiry: DELIFEQ 0, and nothing is left on the backends.
	if ok, err := c.SetNX(ctx, key, "short", 2*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SetNX(%s, short, 2s) [set k v ex 2 nx] = %v, %v; want true", key, ok, err)
	}
	waitExpired(ctx, t, bs, key)
	if n, err := c.Do(ctx, "DELIFEQ", key, "short").Int64(); err != nil || n != 0 {
		t.Fatalf("DELIFEQ after expiry = %d, %v; want 0", n, err)
	}
	if err := c.Do(ctx, "SET", key, "short", "PX", 5000, "IFEQ", "short").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("SET IFEQ after expiry = %v, want null", err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS after expiry = %d, %v; want 0", n, err)
	}

	// Contention: each round all workers fire SetNX at once; never more
	// than one wins; the winner renews and releases with DELIFEQ.
	const workers, rounds = 8, 15
	const ckey = "goredis:contended"
	clients := make([]*redis.Client, workers)
	for i := range clients {
		clients[i] = p.Client(nil)
	}
	var flag inUse
	// fire lets every worker try SetNX once, at the same moment, and
	// returns how many won.
	fire := func(r int) int32 {
		var winners atomic.Int32
		start := make(chan struct{})
		// answered is done once every worker has its SetNX reply; the
		// winner holds the key until then, so a second winner in the
		// round is a real overlap, not a worker whose SetNX a loaded
		// machine delayed past the first winner's release.
		var wg, answered sync.WaitGroup
		answered.Add(workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				tok := fmt.Sprintf("w%d-r%d", w, r)
				cl := clients[w]
				<-start
				ok, err := cl.SetNX(ctx, ckey, tok, 8*time.Second).Result()
				answered.Done()
				if err != nil {
					t.Errorf("round %d worker %d: SetNX: %v", r, w, err)
					return
				}
				if !ok {
					return
				}
				winners.Add(1)
				answered.Wait()
				if !flag.enter() {
					t.Errorf("round %d worker %d won SetNX while another worker was inside", r, w)
				}
				if n, err := backendHolders(ctx, bs, ckey, tok); err != nil || n < interopQuorum {
					t.Errorf("round %d worker %d: held key sits on %d backends (%v), want at least %d", r, w, n, err, interopQuorum)
				}
				if got, err := cl.Do(ctx, "SET", ckey, tok, "EX", 8, "IFEQ", tok).Text(); err != nil || got != "OK" {
					t.Errorf("round %d worker %d: SET k v EX 8 IFEQ v while held = %q, %v; want OK", r, w, got, err)
				}
				time.Sleep(5 * time.Millisecond)
				flag.leave()
				if n, err := cl.Do(ctx, "DELIFEQ", ckey, tok).Int64(); err != nil || n != 1 {
					t.Errorf("round %d worker %d: DELIFEQ while held = %d, %v; want 1", r, w, n, err)
				}
			}(w)
		}
		close(start)
		wg.Wait()
		return winners.Load()
	}
	splitVotes := 0
	for r := 0; r < rounds; r++ {
		for {
			n := fire(r)
			if n > 1 {
				t.Fatalf("round %d: %d of %d workers won SetNX on a free key, want at most 1", r, n, workers)
			}
			if n == 1 {
				break
			}
			// Redlock allows a split vote: every contender got fewer than
			// a quorum and rolled back. Fire the round again.
			splitVotes++
			if splitVotes > 5*rounds {
				t.Fatalf("%d split votes by round %d: SetNX contention never produces a winner", splitVotes, r)
			}
		}
	}
	if v := flag.violations.Load(); v != 0 {
		t.Fatalf("%d acquisitions found another worker inside", v)
	}
	t.Logf("%d rounds of %d contenders: one winner each; %d split votes (no winner, fired again)", rounds, workers, splitVotes)
}
