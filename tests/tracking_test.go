package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// newRueidis is a rueidis client with its default options (client-side
// caching on: HELLO 3, CLIENT TRACKING ON OPTIN) against addr.
func newRueidis(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatalf("rueidis with default options against %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// cachedGet is DoCache(GET key): the value ("" for nil) and whether it
// came from rueidis's cache.
func cachedGet(ctx context.Context, t *testing.T, c rueidis.Client, key string, static bool) (string, bool) {
	t.Helper()
	cmd := c.B().Get().Key(key).Cache()
	if static {
		cmd = cmd.ToStaticTTL() // CLIENT CACHING YES + GET, cached for the whole minute
	}
	r := c.DoCache(ctx, cmd, time.Minute)
	v, err := r.ToString()
	if rueidis.IsRedisNil(err) {
		return "", r.IsCacheHit()
	}
	if err != nil {
		t.Fatalf("DoCache(GET %s): %v", key, err)
	}
	return v, r.IsCacheHit()
}

// waitCached polls DoCache until it answers want, and returns how long
// that took: the invalidation's delay plus one read.
func waitCached(ctx context.Context, t *testing.T, c rueidis.Client, key, want string, static bool, what string) time.Duration {
	t.Helper()
	start := time.Now()
	testkit.Eventually(t, 10*time.Second, what, func() bool {
		v, _ := cachedGet(ctx, t, c, key, static)
		return v == want
	})
	d := time.Since(start)
	t.Logf("%s: after %v", what, d)
	return d
}

// TestRueidisCacheAcrossProxies: rueidis with default options against two
// proxies over the same five backends. A value cached by DoCache through
// one proxy is invalidated when the key changes through the other proxy,
// directly on the backends, and when it expires.
func TestRueidisCacheAcrossProxies(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	pa, pb := startProxy(t, rs, ""), startProxy(t, rs, "")
	a, b := newRueidis(t, pa.Addr()), newRueidis(t, pb.Addr())
	bs := make([]*redis.Client, len(rs))
	for i, r := range rs {
		bs[i] = r.Client()
	}
	ctx := testCtx(t, 2*time.Minute)

	if err := b.Do(ctx, b.B().Set().Key("ck").Value("v1").Build()).Error(); err != nil {
		t.Fatalf("SET through the second proxy: %v", err)
	}
	// A backend that gets the SET after the read below is a change: it
	// invalidates, and the second read would miss.
	settled(t, bs, "ck = v1", holds(ctx, "ck", "v1"))
	if v, hit := cachedGet(ctx, t, a, "ck", false); v != "v1" || hit {
		t.Fatalf("first DoCache = %q (hit %v), want v1 from the proxy", v, hit)
	}
	if v, hit := cachedGet(ctx, t, a, "ck", false); v != "v1" || !hit {
		t.Fatalf("second DoCache = %q (hit %v), want v1 from the cache", v, hit)
	}

	t.Run("changed through the other proxy", func(t *testing.T) {
		if err := b.Do(ctx, b.B().Set().Key("ck").Value("v2").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		settled(t, bs, "ck = v2", holds(ctx, "ck", "v2"))
		if d := waitCached(ctx, t, a, "ck", "v2", false, "the cached value invalidated"); d > 2*time.Second {
			t.Errorf("the invalidation took %v, want well under a second", d)
		}
		if v, hit := cachedGet(ctx, t, a, "ck", false); v != "v2" || !hit {
			t.Fatalf("DoCache after the re-read = %q (hit %v), want v2 cached again", v, hit)
		}
	})

	t.Run("changed on the backends directly", func(t *testing.T) {
		for _, r := range rs {
			if err := r.Client().Set(ctx, "ck", "v3", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		waitCached(ctx, t, a, "ck", "v3", false, "the cached value invalidated by a direct write")
	})

	t.Run("deleted through the other proxy", func(t *testing.T) {
		cachedGet(ctx, t, a, "ck", false)
		if err := b.Do(ctx, b.B().Del().Key("ck").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		waitCached(ctx, t, a, "ck", "", false, "the cached value invalidated by DEL")
	})

	t.Run("expired", func(t *testing.T) {
		// Cached for a minute (a static ttl: rueidis does not cap it with
		// the key's PTTL), while the key lives for two seconds: only the
		// backends' invalidation on expiry can end it.
		if err := b.Do(ctx, b.B().Set().Key("ek").Value("short").Px(2*time.Second).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		settled(t, bs, "ek = short", holds(ctx, "ek", "short"))
		if v, _ := cachedGet(ctx, t, a, "ek", true); v != "short" {
			t.Fatalf("DoCache = %q, want short", v)
		}
		if _, hit := cachedGet(ctx, t, a, "ek", true); !hit {
			t.Fatal("the value was not cached")
		}
		waitCached(ctx, t, a, "ek", "", true, "the cached value invalidated on expiry")
	})

	t.Run("both proxies cache", func(t *testing.T) {
		if err := a.Do(ctx, a.B().Set().Key("both").Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		cachedGet(ctx, t, a, "both", false)
		cachedGet(ctx, t, b, "both", false)
		if err := a.Do(ctx, a.B().Set().Key("both").Value("y").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		waitCached(ctx, t, a, "both", "y", false, "the writer's own cache invalidated")
		waitCached(ctx, t, b, "both", "y", false, "the other proxy's client invalidated")
	})
}

// TestRedsyncOverRueidis: redsync's rueidis pool (rueidis with default
// options, so caching on) locking through the proxy.
func TestRedsyncOverRueidis(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	c := newRueidis(t, p.Addr())
	rsync := redsync.New(redsyncrueidis.NewPool(rueidiscompat.NewAdapter(c)))
	ctx := testCtx(t, time.Minute)

	m := rsync.NewMutex("rsk", redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	holders := 0
	for _, r := range rs {
		if v, _ := r.Client().Get(ctx, "rsk").Result(); v == m.Value() {
			holders++
		}
	}
	if holders < interopQuorum {
		t.Fatalf("the lock sits on %d of 5 backends, want at least %d", holders, interopQuorum)
	}
	other := rsync.NewMutex("rsk", redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
	var taken *redsync.ErrTaken
	if err := other.LockContext(ctx); !errors.As(err, &taken) && !errors.Is(err, redsync.ErrFailed) {
		t.Fatalf("a second Lock = %v, want taken", err)
	}
	if ok, err := m.ExtendContext(ctx); !ok || err != nil {
		t.Fatalf("Extend = %v, %v", ok, err)
	}
	if ok, err := m.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("Unlock = %v, %v", ok, err)
	}
	if err := other.LockContext(ctx); err != nil {
		t.Fatalf("Lock after the release: %v", err)
	}
	if ok, err := other.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("Unlock = %v, %v", ok, err)
	}
}
