package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The client's view of held keys (docs/safety.md, "Holds"): a key the
// tier holds beyond max_ttl answers its expiry as one Redis would, through
// any proxy, while no copy on a backend carries more than max_ttl.

// holdLease and holdsMax are holdsHCL's default_ttl and max_ttl.
const (
	holdLease = 2 * time.Second
	holdsMax  = 4 * time.Second
)

// sameAs runs args on one Redis (ref) and through the proxy (c) and
// fails unless the replies match.
func sameAs(ctx context.Context, t *testing.T, ref, c *redis.Client, args ...any) {
	t.Helper()
	want, werr := ref.Do(ctx, args...).Result()
	got, gerr := c.Do(ctx, args...).Result()
	if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
		t.Errorf("%v: proxy %v, %v; one Redis %v, %v", args, got, gerr, want, werr)
	}
}

// TestPersistHashAsOneRedis: PERSIST of a hash with an expiry answers 1
// and leaves it without expiry, as on one Redis (it was refused outside a
// script while PERSIST inside one was served); the key then lives past
// three leases, each backend's copy within max_ttl.
func TestPersistHashAsOneRedis(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	ref := startRedis(t).Client()
	p := startProxy(t, rs, holdsHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	for _, cmd := range [][]any{
		{"HSET", "h", "f", "v"},
		{"PEXPIRE", "h", "1500"},
		{"PERSIST", "h"},
		{"TTL", "h"},
		{"PERSIST", "h"},
		{"PERSIST", "absent"},
	} {
		sameAs(ctx, t, ref, c, cmd...)
	}
	time.Sleep(3 * holdLease)
	sameAs(ctx, t, ref, c, "HGET", "h", "f")
	sameAs(ctx, t, ref, c, "TTL", "h")
	backendsBounded(ctx, t, rs, "h", holdsMax)
}
