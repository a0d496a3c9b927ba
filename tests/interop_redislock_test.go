package tests

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// TestInteropBsmRedislock: bsm/redislock v0.9.4 over go-redis v9 (scripts
// by EVALSHA, then EVAL on NOSCRIPT). Its obtain script takes the lock
// with SET NX PX or re-enters it when the stored value begins with the
// same token (GETRANGE), answering a status reply: it runs by vote. Its
// refresh, release and TTL scripts are recognised.
func TestInteropBsmRedislock(t *testing.T) {
	t.Parallel()
	_, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)
	locker := redislock.New(p.Client(&redis.Options{PoolSize: 16}))

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 6, 5
		const key = "bsm:contended"
		var flag inUse
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					retry := redislock.LimitRetry(redislock.LinearBackoff(10*time.Millisecond), 2000)
					octx, cancel := context.WithTimeout(ctx, 20*time.Second)
					l, err := locker.Obtain(octx, key, 2*time.Second, &redislock.Options{RetryStrategy: retry})
					cancel()
					if err != nil {
						t.Errorf("worker %d round %d: Obtain: %v", w, r, err)
						return
					}
					if !flag.enter() {
						t.Errorf("worker %d round %d: obtained %s while another worker was inside", w, r, key)
					}
					if n, err := backendHolders(ctx, bs, key, l.Token()+l.Metadata()); err != nil || n < interopQuorum {
						t.Errorf("worker %d round %d: the held lock sits on %d backends (%v), want at least %d", w, r, n, err, interopQuorum)
					}
					if err := l.Refresh(ctx, 2*time.Second, nil); err != nil {
						t.Errorf("worker %d round %d: Refresh while held: %v", w, r, err)
					}
					time.Sleep(5 * time.Millisecond)
					flag.leave()
					if err := l.Release(ctx); err != nil {
						t.Errorf("worker %d round %d: Release while held: %v", w, r, err)
					}
				}
			}(w)
		}
		wg.Wait()
		if v := flag.violations.Load(); v != 0 {
			t.Fatalf("%d of %d acquisitions found another worker inside", v, flag.entries.Load())
		}
		if e := flag.entries.Load(); e != workers*rounds {
			t.Fatalf("%d acquisitions, want %d", e, workers*rounds)
		}
	})

	t.Run("obtain-refresh-release", func(t *testing.T) {
		const key = "bsm:single"
		l, err := locker.Obtain(ctx, key, 2*time.Second, &redislock.Options{Metadata: ":meta"})
		if err != nil {
			t.Fatalf("Obtain: %v", err)
		}
		value := l.Token() + l.Metadata()
		requireQuorum(ctx, t, bs, key, value, "after Obtain")
		if _, err := locker.Obtain(ctx, key, 2*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("Obtain of a held key = %v, want ErrNotObtained", err)
		}
		if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 || ttl > 2*time.Second {
			t.Fatalf("TTL = %v, %v; want in (0, 2s]", ttl, err)
		}
		if err := l.Refresh(ctx, 5*time.Second, nil); err != nil {
			t.Fatalf("Refresh to 5s: %v", err)
		}
		if n := countAbove(backendPTTLs(ctx, t, bs, key), 3*time.Second); n < interopQuorum {
			t.Fatalf("after Refresh to 5s, %d backends have a ttl above 3s, want at least %d", n, interopQuorum)
		}

		// Re-entry: the same token with new metadata takes the lock again
		// (the obtain script's GETRANGE branch) and replaces the value.
		again, err := locker.Obtain(ctx, key, 4*time.Second, &redislock.Options{Token: l.Token(), Metadata: ":again"})
		if err != nil {
			t.Fatalf("Obtain with the holder's token (re-entry): %v", err)
		}
		requireQuorum(ctx, t, bs, key, l.Token()+":again", "after re-entry")
		// The first handle's value is gone: its Refresh and Release fail
		// and leave the lock alone.
		if err := l.Refresh(ctx, 2*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("Refresh with the replaced value = %v, want ErrNotObtained", err)
		}
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
			t.Fatalf("Release with the replaced value = %v, want ErrLockNotHeld", err)
		}
		requireQuorum(ctx, t, bs, key, l.Token()+":again", "after a stale Release")
		if err := again.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		requireNowhere(ctx, t, bs, key, l.Token()+":again", "after Release")
		if err := again.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
			t.Fatalf("second Release = %v, want ErrLockNotHeld", err)
		}
		if ttl, err := again.TTL(ctx); err != nil || ttl != 0 {
			t.Fatalf("TTL after Release = %v, %v; want 0", ttl, err)
		}
	})

	t.Run("release-after-expiry", func(t *testing.T) {
		const key = "bsm:expiring"
		l, err := locker.Obtain(ctx, key, 2*time.Second, nil)
		if err != nil {
			t.Fatalf("Obtain: %v", err)
		}
		requireQuorum(ctx, t, bs, key, l.Token(), "after Obtain")
		waitExpired(ctx, t, bs, key)
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
			t.Fatalf("Release after expiry = %v, want ErrLockNotHeld", err)
		}
		if err := l.Refresh(ctx, 2*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("Refresh after expiry = %v, want ErrNotObtained", err)
		}
		// Another owner holds it now: the old handle leaves it alone.
		next, err := locker.Obtain(ctx, key, 2*time.Second, nil)
		if err != nil {
			t.Fatalf("Obtain after expiry: %v", err)
		}
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
			t.Fatalf("stale Release = %v, want ErrLockNotHeld", err)
		}
		requireQuorum(ctx, t, bs, key, next.Token(), "after a stale Release")
		if err := next.Release(ctx); err != nil {
			t.Fatalf("Release by the new owner: %v", err)
		}
	})
}
