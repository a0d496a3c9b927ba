package tests

import (
	"context"
	"fmt"
	"strings"
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

// TestPeerAnswersTheHoldsExpiry: keys held through proxy A (SET without
// expiry, SET EX 600), read and changed through proxy B of the tier, both
// at once (B's claim rounds have not seen the record yet) and after B's
// claim rounds did. B answered the copies' lease (TTL 2 where one Redis
// answers -1), and decided EXPIRE's options and SET KEEPTTL on it, so
// that a write through B ended a hold one Redis keeps. Every reply is
// compared with one redis-server given the same commands; after three
// leases the keys live (or are gone) as there, every copy within max_ttl.
func TestPeerAnswersTheHoldsExpiry(t *testing.T) {
	t.Parallel()
	for _, wait := range []time.Duration{0, 2 * time.Second} {
		t.Run(fmt.Sprint("after-", wait), func(t *testing.T) {
			t.Parallel()
			rs := startCluster(t, 3)
			ref := startRedis(t).Client()
			a := startProxy(t, rs, holdsHCL)
			b := startProxy(t, rs, holdsHCL)
			ca, cb := a.Client(nil), b.Client(nil)
			ctx := testCtx(t, 90*time.Second)
			keys := []string{"forever", "long", "keepttl", "keepttl600", "xx", "gt", "nx", "lt", "persist", "persist600"}
			for _, k := range keys {
				args := []any{"SET", k, "v"}
				if strings.HasSuffix(k, "600") || k == "long" || k == "lt" {
					args = append(args, "EX", "600")
				}
				if err := ref.Do(ctx, args...).Err(); err != nil {
					t.Fatal(err)
				}
				if err := ca.Do(ctx, args...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(wait)
			for _, cmd := range [][]any{
				{"TTL", "forever"},
				{"PEXPIRETIME", "forever"},
				{"SET", "keepttl", "w", "KEEPTTL"},
				{"SET", "keepttl600", "w", "KEEPTTL"},
				{"TTL", "keepttl"},
				{"EXPIRE", "xx", "1", "XX"},
				{"EXPIRE", "gt", "10", "GT"},
				{"EXPIRE", "nx", "1", "NX"},
				{"EXPIRE", "lt", "100", "LT"},
				{"PERSIST", "persist"},
				{"PERSIST", "persist600"},
				{"TTL", "persist600"},
			} {
				sameAs(ctx, t, ref, cb, cmd...)
			}
			for _, k := range []string{"long", "keepttl600", "lt"} {
				want, got := ref.TTL(ctx, k).Val(), cb.TTL(ctx, k).Val()
				if d := want - got; d < -time.Second || d > 2*time.Second {
					t.Errorf("TTL %s through B = %v; one Redis %v", k, got, want)
				}
			}
			time.Sleep(3 * holdLease)
			for _, k := range keys {
				sameAs(ctx, t, ref, cb, "EXISTS", k)
				sameAs(ctx, t, ref, ca, "GET", k)
				backendsBounded(ctx, t, rs, k, holdsMax)
			}
			for _, k := range []string{"forever", "keepttl", "xx", "gt", "persist", "persist600"} {
				sameAs(ctx, t, ref, ca, "TTL", k)
				sameAs(ctx, t, ref, cb, "TTL", k)
			}
		})
	}
}
