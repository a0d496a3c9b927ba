package tests

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestWritesByVoteOneOrderAcrossProxies: writes by vote of one key
// through two proxies at once reach every backend in one order (the
// keys' order lock, docs/compatibility.md): 400 APPENDs from eight
// clients leave one value on all three backends, every APPEND in it; and
// two HSETs of one field at once, one through each proxy, leave the same
// value on every backend, for each of 50 keys.
func TestWritesByVoteOneOrderAcrossProxies(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	ps := []*redis.Client{startProxy(t, rs, "").Client(nil), startProxy(t, rs, "").Client(nil)}
	ctx := testCtx(t, 120*time.Second)

	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ps[w%2]
			for range each {
				if err := c.Append(ctx, "ap", string(rune('a'+w))).Err(); err != nil {
					t.Errorf("APPEND: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	vals := map[string]bool{}
	for _, r := range rs {
		vals[r.Client().Get(ctx, "ap").Val()] = true
	}
	if len(vals) != 1 {
		t.Fatalf("%d acknowledged APPENDs left %d different values on 3 backends", writers*each, len(vals))
	}
	for v := range vals {
		if len(v) != writers*each {
			t.Fatalf("the value has %d bytes, want %d (one per APPEND)", len(v), writers*each)
		}
	}

	diverged := 0
	for i := range 50 {
		key := fmt.Sprintf("h:%d", i)
		var wg sync.WaitGroup
		for j, c := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.HSet(ctx, key, "f", j).Err(); err != nil {
					t.Errorf("HSET: %v", err)
				}
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		for _, r := range rs {
			seen[r.Client().HGet(ctx, key, "f").Val()] = true
		}
		if len(seen) > 1 {
			diverged++
		}
	}
	if diverged > 0 {
		t.Fatalf("%d of 50 keys, HSET once through each proxy at once, differ between backends", diverged)
	}
}
