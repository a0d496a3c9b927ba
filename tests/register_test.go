package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Concurrent plain writes to one key must leave every backend with the
// same value, and that value must be what GET answers with any one
// backend stopped: an acknowledged write is not lost to a minority.

func TestConcurrentWritesOneProxy(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	concurrentWrites(t, rs, []*proxyProc{p})
}

func TestConcurrentWritesTwoProxies(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p1 := startProxy(t, rs, "")
	p2 := startProxy(t, rs, "")
	concurrentWrites(t, rs, []*proxyProc{p1, p2})
}

// concurrentWrites runs rounds of five simultaneous SET k wN through ps
// (writer i through ps[i%len(ps)]), then checks the backends agree and
// that GET answers their value with one backend stopped.
func concurrentWrites(t *testing.T, rs []*redisProc, ps []*proxyProc) {
	ctx := testCtx(t, 2*time.Minute)
	const writers, rounds = 5, 40
	clients := make([]*redis.Client, writers)
	for i := range clients {
		clients[i] = ps[i%len(ps)].Client(&redis.Options{PoolSize: 1})
	}
	reader := ps[0].Client(nil)
	backends := make([]*redis.Client, len(rs))
	for i, r := range rs {
		backends[i] = r.Client()
	}
	for round := range rounds {
		key := fmt.Sprintf("reg:%d", round)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				<-start
				if err := c.Set(ctx, key, fmt.Sprintf("w%d", i), 0).Err(); err != nil {
					t.Errorf("SET %s w%d: %v", key, i, err)
				}
			})
		}
		close(start)
		wg.Wait()

		// Every backend ends with the same value (calls still in flight
		// when the quorum answered may land just after).
		held := backendValues(ctx, backends, key)
		for deadline := time.Now().Add(5 * time.Second); !same(held) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			held = backendValues(ctx, backends, key)
		}
		if !same(held) {
			t.Fatalf("%s: backends split %q after five concurrent SETs", key, held)
		}
		i := round % len(rs)
		rs[i].Stop()
		got, err := reader.Get(ctx, key).Result()
		rs[i].Cont()
		if err != nil || got != held[0] {
			t.Fatalf("%s: GET with backend %d stopped = %q, %v; want %q (on every backend)", key, i, got, err, held[0])
		}
	}
}

func backendValues(ctx context.Context, backends []*redis.Client, key string) []string {
	held := make([]string, len(backends))
	for i, b := range backends {
		held[i], _ = b.Get(ctx, key).Result()
	}
	return held
}

func same(vs []string) bool {
	for _, v := range vs {
		if v != vs[0] {
			return false
		}
	}
	return true
}
