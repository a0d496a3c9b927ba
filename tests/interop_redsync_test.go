package tests

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// TestInteropRedsync: redsync v4 with ONE pool pointed at the proxy (its
// quorum is then 1; the proxy runs the real one over five backends). Its
// scripts arrive as EVALSHA, then EVAL on NOSCRIPT.
func TestInteropRedsync(t *testing.T) {
	t.Parallel()
	_, p, bs := interopSetup(t)
	ctx := testCtx(t, 60*time.Second)
	// redsync gives an acquire expiry × 0.05 of context; go-redis ignores
	// context deadlines unless ContextTimeoutEnabled, as apps run it.
	rs := redsync.New(goredis.NewPool(p.Client(&redis.Options{PoolSize: 16})))

	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 8, 6
		const name = "redsync:contended"
		var flag inUse
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					m := rs.NewMutex(name, redsync.WithExpiry(20*time.Second), redsync.WithTries(400), redsync.WithRetryDelay(10*time.Millisecond))
					if err := m.LockContext(ctx); err != nil {
						t.Errorf("worker %d round %d: Lock: %v", w, r, err)
						return
					}
					if !flag.enter() {
						t.Errorf("worker %d round %d: locked %s while another worker was inside", w, r, name)
					}
					if n, err := backendHolders(ctx, bs, name, m.Value()); err != nil || n < interopQuorum {
						t.Errorf("worker %d round %d: held mutex sits on %d backends (%v), want at least %d", w, r, n, err, interopQuorum)
					}
					if ok, err := m.ExtendContext(ctx); err != nil || !ok {
						t.Errorf("worker %d round %d: Extend while held = %v, %v; want true, nil", w, r, ok, err)
					}
					time.Sleep(5 * time.Millisecond)
					flag.leave()
					if ok, err := m.UnlockContext(ctx); err != nil || !ok {
						t.Errorf("worker %d round %d: Unlock while held = %v, %v; want true, nil", w, r, ok, err)
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

	t.Run("lock-extend-unlock", func(t *testing.T) {
		const name = "redsync:single"
		m := rs.NewMutex(name, redsync.WithExpiry(2*time.Second), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		requireQuorum(ctx, t, bs, name, m.Value(), "after Lock")

		other := rs.NewMutex(name, redsync.WithExpiry(2*time.Second), redsync.WithTries(2), redsync.WithRetryDelay(10*time.Millisecond))
		err := other.LockContext(ctx)
		var taken *redsync.ErrTaken
		if !errors.As(err, &taken) {
			t.Fatalf("Lock of a held mutex = %v, want *redsync.ErrTaken", err)
		}
		requireQuorum(ctx, t, bs, name, m.Value(), "after another mutex failed to lock")

		// Extend sets the ttl back to the expiry (the touch script's PEXPIRE).
		m5 := rs.NewMutex(name, redsync.WithExpiry(5*time.Second), redsync.WithValue(m.Value()))
		if ok, err := m5.ExtendContext(ctx); err != nil || !ok {
			t.Fatalf("Extend to 5s with the owner's value = %v, %v; want true", ok, err)
		}
		if n := countAbove(backendPTTLs(ctx, t, bs, name), 3*time.Second); n < interopQuorum {
			t.Fatalf("after Extend to 5s, %d backends have a ttl above 3s, want at least %d", n, interopQuorum)
		}
		if ok, err := other.ExtendContext(ctx); ok || err == nil {
			t.Fatalf("Extend by a mutex that does not hold the lock = %v, %v; want false and an error", ok, err)
		}
		if ok, err := other.UnlockContext(ctx); ok || err == nil {
			t.Fatalf("Unlock by a mutex that does not hold the lock = %v, %v; want false and an error", ok, err)
		}
		requireQuorum(ctx, t, bs, name, m.Value(), "after another mutex tried to extend and unlock")

		if ok, err := m.UnlockContext(ctx); err != nil || !ok {
			t.Fatalf("Unlock = %v, %v; want true, nil", ok, err)
		}
		requireNowhere(ctx, t, bs, name, m.Value(), "after Unlock")
		// The key is gone: the release script answers -1.
		ok, err := m.UnlockContext(ctx)
		if ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
			t.Fatalf("second Unlock = %v, %v; want false, ErrLockAlreadyExpired", ok, err)
		}
	})

	t.Run("unlock-after-expiry", func(t *testing.T) {
		const name = "redsync:expiring"
		m := rs.NewMutex(name, redsync.WithExpiry(2*time.Second), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			t.Fatalf("Lock with 2s expiry: %v", err)
		}
		requireQuorum(ctx, t, bs, name, m.Value(), "after Lock")
		waitExpired(ctx, t, bs, name)
		ok, err := m.UnlockContext(ctx)
		if ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
			t.Fatalf("Unlock after expiry = %v, %v; want false and an error that errors.Is ErrLockAlreadyExpired", ok, err)
		}
		if ok, err := m.ExtendContext(ctx); ok || err == nil {
			t.Fatalf("Extend after expiry = %v, %v; want false and an error", ok, err)
		}
		if n, err := backendHolders(ctx, bs, name, m.Value()); err != nil || n != 0 {
			t.Fatalf("after a failed Extend the expired value sits on %d backends (%v), want 0", n, err)
		}

		// Someone else holds it now: the old owner's Unlock finds another
		// value (0, not -1) and must leave the new owner's lock alone.
		m2 := rs.NewMutex(name, redsync.WithExpiry(2*time.Second), redsync.WithTries(1))
		if err := m2.LockContext(ctx); err != nil {
			t.Fatalf("Lock by a second mutex after expiry: %v", err)
		}
		ok, err = m.UnlockContext(ctx)
		if ok || err == nil || errors.Is(err, redsync.ErrLockAlreadyExpired) {
			t.Fatalf("stale Unlock while another mutex holds the lock = %v, %v; want false and an error that is not ErrLockAlreadyExpired", ok, err)
		}
		requireQuorum(ctx, t, bs, name, m2.Value(), "after a stale Unlock")
		if ok, err := m2.UnlockContext(ctx); err != nil || !ok {
			t.Fatalf("Unlock by the new owner = %v, %v; want true", ok, err)
		}
	})

	t.Run("setnx-on-extend", func(t *testing.T) {
		const name = "redsync:setnx-extend"
		m := rs.NewMutex(name, redsync.WithExpiry(2*time.Second), redsync.WithTries(1), redsync.WithSetNXOnExtend())
		if err := m.LockContext(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		// While held: the script's PEXPIRE branch.
		if ok, err := m.ExtendContext(ctx); err != nil || !ok {
			t.Fatalf("Extend (SetNX on extend) while held = %v, %v; want true", ok, err)
		}
		requireQuorum(ctx, t, bs, name, m.Value(), "after Extend while held")
		// After expiry: the script's SET NX PX branch takes the lock again.
		waitExpired(ctx, t, bs, name)
		if n, err := backendHolders(ctx, bs, name, m.Value()); err != nil || n != 0 {
			t.Fatalf("after expiry the value sits on %d backends (%v), want 0", n, err)
		}
		if ok, err := m.ExtendContext(ctx); err != nil || !ok {
			t.Fatalf("Extend (SetNX on extend) after expiry = %v, %v; want true (re-acquired)", ok, err)
		}
		requireQuorum(ctx, t, bs, name, m.Value(), "after Extend re-acquired an expired lock")

		// Held by someone else: neither branch applies.
		other := rs.NewMutex(name, redsync.WithExpiry(2*time.Second), redsync.WithSetNXOnExtend(), redsync.WithValue("someone-else"))
		if ok, err := other.ExtendContext(ctx); ok || err == nil {
			t.Fatalf("Extend (SetNX on extend) of a lock another owner holds = %v, %v; want false and an error", ok, err)
		}
		requireQuorum(ctx, t, bs, name, m.Value(), "after another owner's SetNX-on-extend")
		if ok, err := m.UnlockContext(ctx); err != nil || !ok {
			t.Fatalf("Unlock = %v, %v; want true", ok, err)
		}
		requireNowhere(ctx, t, bs, name, m.Value(), "after Unlock")
	})
}
