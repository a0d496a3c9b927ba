package tests

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTwoWritersWithoutExpiry: two connections write the same keys
// without expiry at the same moment (SET and GETSET), through one proxy
// and through two. Whichever value the backends kept, the key is still
// there three default_ttl later: data carries no expiry (once, writes
// without expiry were leases kept by the last caller, whose value could
// have lost, and the key expired).
func TestTwoWritersWithoutExpiry(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	// 4 s: each renewal call's deadline is 5% of it, 200 ms, which a
	// loaded machine meets.
	a := startProxy(t, rs, `default_ttl = "4s"`)
	b := startProxy(t, rs, `default_ttl = "4s"`)
	ctx := testCtx(t, 90*time.Second)
	a1, a2, b1 := a.Client(nil), a.Client(nil), b.Client(nil)
	const keys = 60
	for i := range keys {
		key := fmt.Sprintf("two%d", i)
		second := a2 // even keys: two connections to A; odd: A and B
		if i%2 == 1 {
			second = b1
		}
		var wg sync.WaitGroup
		for j, c := range []*redis.Client{a1, second} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := fmt.Sprintf("v%d", j)
				// A write refused for want of a quorum (a node deadline a
				// loaded machine missed) is sent again.
				var err error
				for until := time.Now().Add(30 * time.Second); time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
					if (i/2+j)%2 == 0 {
						err = c.Set(ctx, key, v, 0).Err()
					} else {
						err = c.Do(ctx, "GETSET", key, v).Err()
					}
					if err == nil || err == redis.Nil {
						return
					}
				}
				t.Errorf("write %s %s: %v", key, v, err)
			}()
		}
		wg.Wait()
	}
	time.Sleep(12 * time.Second) // three default_ttl: what is not renewed has expired
	var gone []string
	for i := range keys {
		key := fmt.Sprintf("two%d", i)
		if n, err := a1.Exists(ctx, key).Result(); err != nil || n != 1 {
			gone = append(gone, fmt.Sprintf("%s (%d, %v)", key, n, err))
		}
	}
	if len(gone) > 0 {
		t.Fatalf("%d of %d keys written without expiry gone three default_ttl later: %v", len(gone), keys, gone)
	}
}
