package tests

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
