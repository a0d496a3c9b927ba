package tests

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestContendedSetNXFromMemory: contenders for a lock taken with SET NX
// PX through a proxy are refused by that proxy from memory (INFO
// lock_held_fast grows); a DEL through the same proxy frees the key for
// the next contender at once, and a DEL through another proxy over the
// same backends frees it within seconds, well inside the lock's 20 s
// validity that the memory would otherwise trust.
func TestContendedSetNXFromMemory(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p1, p2 := startProxy(t, rs, ""), startProxy(t, rs, "")
	ctx := testCtx(t, 90*time.Second)
	holder, contender, other := p1.Client(nil), p1.Client(nil), p2.Client(nil)
	const key = "contend:k"
	const ttl = 20 * time.Second

	take := func(c *redis.Client, v string) bool {
		t.Helper()
		ok, err := c.SetNX(ctx, key, v, ttl).Result()
		if err != nil {
			t.Fatalf("SET %s %s PX NX: %v", key, v, err)
		}
		return ok
	}
	infoc := p1.Client(nil)
	fast := func() int64 {
		n, _ := strconv.ParseInt(infoField(t, infoc, "locks", "lock_held_fast"), 10, 64)
		return n
	}
	if !take(holder, "a") {
		t.Fatal("the first SET NX was refused")
	}
	// Contenders come in bursts, each on its own connection: the note
	// answers those within 10 ms of the last one that asked the
	// backends, and a burst lands inside that however slow the machine.
	burst := make([]*redis.Client, 8)
	for i := range burst {
		burst[i] = p1.Client(nil)
	}
	testkit.Eventually(t, 30*time.Second, "a contender refused from memory", func() bool {
		var wg sync.WaitGroup
		got := make([]bool, len(burst))
		for i, c := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], _ = c.SetNX(ctx, key, "b", ttl).Result()
			}()
		}
		wg.Wait()
		if slices.Contains(got, true) {
			t.Fatal("a contender got the held key")
		}
		return fast() > 0
	})

	// DEL through this proxy: the next contender asks, and gets the key.
	if err := holder.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if !take(contender, "b") {
		t.Fatal("SET NX right after a DEL through the same proxy was refused")
	}

	// DEL through another proxy, behind p1's back.
	if err := other.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the key freed through another proxy taken through p1", func() bool {
		return take(holder, "c")
	})
	if v, err := other.Get(ctx, key).Result(); err != nil || v != "c" {
		t.Fatalf("GET through the other proxy = %q, %v; want c", v, err)
	}
}
