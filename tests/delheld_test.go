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

// TestDelOfAGrantFallsBack: DEL of a lock granted through a proxy is that
// lock's release when the key still holds the value the proxy wrote
// (INFO unlock_released grows; a contender through another proxy gets the
// key), and DEL as on one Redis when it changed since through another
// proxy: another value written (data now), the same value written
// plainly, the key already deleted. Either way the key is gone for every
// proxy and DEL counts the key if it existed.
func TestDelOfAGrantFallsBack(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p1, p2 := startProxy(t, rs, ""), startProxy(t, rs, "")
	ctx := testCtx(t, 90*time.Second)
	c1, c2, info := p1.Client(nil), p2.Client(nil), p1.Client(nil)
	released := func() int64 {
		n, _ := strconv.ParseInt(infoField(t, info, "locks", "unlock_released"), 10, 64)
		return n
	}
	for _, tc := range []struct {
		name    string
		change  func(key string) error
		existed bool
		release bool
	}{
		{"unchanged", func(string) error { return nil }, true, true},
		{"another value", func(key string) error { return c2.Set(ctx, key, "data", 0).Err() }, true, false},
		{"same value plainly", func(key string) error { return c2.Set(ctx, key, "a", 0).Err() }, true, false},
		{"deleted elsewhere", func(key string) error { return c2.Del(ctx, key).Err() }, false, false},
	} {
		for _, ttl := range []time.Duration{0, 20 * time.Second} {
			key := "delheld:" + tc.name + ":" + ttl.String()
			if ok, err := c1.SetNX(ctx, key, "a", ttl).Result(); err != nil || !ok {
				t.Fatalf("%s: SET NX = %v, %v", key, ok, err)
			}
			if err := tc.change(key); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			before := released()
			n, err := c1.Del(ctx, key).Result()
			if err != nil || (n == 1) != tc.existed {
				t.Fatalf("%s: DEL = %d, %v; the key existed: %v", key, n, err, tc.existed)
			}
			if got := released() - before; (got == 1) != tc.release || got > 1 {
				t.Fatalf("%s: unlock_released grew by %d; a release: %v", key, got, tc.release)
			}
			for i, c := range []*redis.Client{c1, c2} {
				if v, err := c.Get(ctx, key).Result(); err != redis.Nil {
					t.Fatalf("%s: GET through proxy %d after DEL = %q, %v; want nil", key, i+1, v, err)
				}
			}
			if ok, err := c2.SetNX(ctx, key, "b", ttl).Result(); err != nil || !ok {
				t.Fatalf("%s: SET NX through the other proxy after DEL = %v, %v", key, ok, err)
			}
		}
	}
}

// TestSetNXKeptAnsweredFromMemory: contenders retrying SETNX and SET NX
// (without expiry) on a key a proxy granted without expiry are refused by
// that proxy from memory (INFO lock_held_fast grows), never granted; the
// holder's DEL frees the key for the next contender at once, and a DEL
// through another proxy frees it within seconds.
func TestSetNXKeptAnsweredFromMemory(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p1, p2 := startProxy(t, rs, ""), startProxy(t, rs, "")
	ctx := testCtx(t, 90*time.Second)
	holder, other, infoc := p1.Client(nil), p2.Client(nil), p1.Client(nil)
	const key = "kept:contended"
	fast := func() int64 {
		n, _ := strconv.ParseInt(infoField(t, infoc, "locks", "lock_held_fast"), 10, 64)
		return n
	}
	if ok, err := holder.SetNX(ctx, key, "a", 0).Result(); err != nil || !ok {
		t.Fatalf("SETNX = %v, %v", ok, err)
	}
	burst := make([]*redis.Client, 8)
	for i := range burst {
		burst[i] = p1.Client(nil)
	}
	testkit.Eventually(t, 30*time.Second, "a SETNX contender refused from memory", func() bool {
		var wg sync.WaitGroup
		got := make([]bool, len(burst))
		for i, c := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					got[i], _ = c.SetNX(ctx, key, "b", 0).Result()
				} else {
					n, _ := c.Do(ctx, "SETNX", key, "b").Int()
					got[i] = n == 1
				}
			}()
		}
		wg.Wait()
		if slices.Contains(got, true) {
			t.Fatal("a contender got the held key")
		}
		return fast() > 0
	})
	if v, err := other.Get(ctx, key).Result(); err != nil || v != "a" {
		t.Fatalf("GET through the other proxy = %q, %v; want a", v, err)
	}

	// The holder's DEL: the next contender through the same proxy gets it.
	if err := holder.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := burst[0].SetNX(ctx, key, "b", 0).Result(); err != nil || !ok {
		t.Fatalf("SETNX right after the holder's DEL = %v, %v", ok, err)
	}
	// DEL through another proxy, behind p1's back.
	if err := other.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the key freed through another proxy taken through p1", func() bool {
		ok, err := holder.SetNX(ctx, key, "c", 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	if v, err := other.Get(ctx, key).Result(); err != nil || v != "c" {
		t.Fatalf("GET through the other proxy = %q, %v; want c", v, err)
	}
}
