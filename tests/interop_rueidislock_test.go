package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// rueidislock (github.com/redis/rueidis/rueidislock, part of the rueidis
// module, v1.0.79) keeps each lock as KeyMajority of 2·KeyMajority−1 keys
// (rueidislock:<i>:<name>, 2 of 3 by default), each taken by a script
// (SET NX PXAT, then GET), extended by a script (PEXPIREAT, then GET) and
// released by the redis.io compare-and-delete. Its waiters do not poll:
// with client-side caching on (CLIENT TRACKING ON OPTOUT NOLOOP), a lock
// attempt's GET tracks the key, and the invalidation the release or the
// expiry causes wakes the waiter; its only other way out is its context's
// deadline. Through the proxy the three scripts are recognised (the
// attempt and the extend by their deadline argument, a Unix time), so an
// attempt that wins only a minority of backends is rolled back; the
// invalidations come from every backend's tracking connection, whichever
// proxy the change went through. Only ForceWithContext runs by vote.

// newRueidisLocker is a rueidislock Locker against addr with client-side
// caching and NoLoopTracking (its recommended setting: without it a
// holder re-extends on its own extends' invalidations, on Redis as here).
// TryNextAfter is also the time limit of each key's attempt: its default,
// 20 ms, is less than a script by vote on five backends can take on a
// loaded machine, where an attempt would then fail for want of time.
func newRueidisLocker(t *testing.T, addr string, validity time.Duration, tweak func(*rueidislock.LockerOption)) rueidislock.Locker {
	t.Helper()
	opt := rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyValidity:    validity,
		NoLoopTracking: true,
		TryNextAfter:   time.Second,
	}
	if tweak != nil {
		tweak(&opt)
	}
	l, err := rueidislock.NewLocker(opt)
	if err != nil {
		t.Fatalf("rueidislock.NewLocker against %s: %v", addr, err)
	}
	t.Cleanup(l.Close)
	return l
}

// rueidisKeysHeld counts the lock's keys (rueidislock:<i>:<name>, i < 3)
// that hold one value on a quorum of the backends, reading them directly.
func rueidisKeysHeld(ctx context.Context, t *testing.T, bs []*redis.Client, name string) int {
	t.Helper()
	held := 0
	for i := range 3 {
		key := fmt.Sprintf("rueidislock:%d:%s", i, name)
		count := map[string]int{}
		for _, b := range bs {
			v, err := b.Get(ctx, key).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				t.Errorf("GET %s on backend %s: %v", key, b.Options().Addr, err)
				return 0
			}
			count[v]++
		}
		for _, n := range count {
			if n >= interopQuorum {
				held++
				break
			}
		}
	}
	return held
}

// rueidisKeysGone waits until no backend has any of the lock's keys.
func rueidisKeysGone(ctx context.Context, t *testing.T, bs []*redis.Client, name string) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "the lock's keys gone from every backend", func() bool {
		for i := range 3 {
			for _, b := range bs {
				if n, _ := b.Exists(ctx, fmt.Sprintf("rueidislock:%d:%s", i, name)).Result(); n != 0 {
					return false
				}
			}
		}
		return true
	})
}

// TestInteropRueidislock drives rueidislock through two proxies over the
// same five backends.
func TestInteropRueidislock(t *testing.T) {
	t.Parallel()
	rs, pa, bs := interopSetup(t)
	pb := startProxy(t, rs, "")
	ctx := testCtx(t, 3*time.Minute)

	// Workers on both proxies: a release through one wakes a waiter on
	// the other; nothing but the invalidation can wake it before its
	// context's deadline (30 s).
	t.Run("contention", func(t *testing.T) {
		const workers, rounds = 4, 4
		const name = "contended"
		var flag inUse
		var mu sync.Mutex
		var ws []heldWindow
		base := time.Now()
		since := func() int64 { return int64(time.Since(base)) }
		var wg sync.WaitGroup
		for w := range workers {
			p := []*proxyProc{pa, pb}[w%2]
			// The library's default validity (5 s, extended every 2.5 s):
			// a loaded machine that stalls the proxy or the backends for
			// a second loses no lock. A split attempt is undone, so no
			// hand-off waits for a validity (docs/compatibility.md).
			l := newRueidisLocker(t, p.Addr(), 5*time.Second, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					wait := since()
					wctx, stop := context.WithTimeout(ctx, 30*time.Second)
					lctx, cancel, err := l.WithContext(wctx, name)
					if err != nil {
						stop()
						t.Errorf("worker %d round %d: WithContext: %v", w, r, err)
						return
					}
					start := since()
					if !flag.enter() {
						t.Errorf("worker %d round %d: locked %s while another worker was inside", w, r, name)
					}
					if n := rueidisKeysHeld(ctx, t, bs, name); n < 2 {
						t.Errorf("worker %d round %d: %d of the lock's 3 keys sit on a quorum of backends, want at least 2", w, r, n)
					}
					time.Sleep(300 * time.Millisecond)
					if lctx.Err() != nil {
						t.Errorf("worker %d round %d: the lock was lost while held: %v", w, r, context.Cause(lctx))
					}
					end := since()
					flag.leave()
					cancel()
					stop()
					mu.Lock()
					ws = append(ws, heldWindow{worker: w, wait: wait, start: start, end: end})
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if v := flag.violations.Load(); v != 0 {
			t.Fatalf("%d of %d acquisitions found another worker inside", v, flag.entries.Load())
		}
		// Attempts through two proxies at once may both win a minority of
		// a key's backends; both are rolled back, and the rollback's
		// invalidation wakes the waiters: no hand-off waits for an expiry.
		median := requirePrompt(t, "rueidislock, workers on two proxies", handoffGaps(t, ws), workers*rounds/2, 5*time.Second)
		if median > time.Second {
			t.Errorf("rueidislock, workers on two proxies: median hand-off %v, want under 1 s", median)
		}
		rueidisKeysGone(ctx, t, bs, name)
		for _, p := range []*proxyProc{pa, pb} {
			if strings.Contains(p.Log(), "script runs by vote") {
				t.Errorf("a rueidislock script ran by vote, not as a lock operation:\n%s", p.Log())
			}
		}
	})

	// Held for 9 s with a 4 s validity: its extends (PEXPIREAT by vote)
	// keep it; released, its keys leave every backend. Extends every 2 s
	// leave a stall of 2 s to a loaded machine.
	t.Run("extend-release", func(t *testing.T) {
		const name = "extended"
		a := newRueidisLocker(t, pa.Addr(), 4*time.Second, nil)
		b := newRueidisLocker(t, pb.Addr(), 4*time.Second, nil)
		lctx, cancel, err := a.WithContext(ctx, name)
		if err != nil {
			t.Fatalf("WithContext: %v", err)
		}
		if n := rueidisKeysHeld(ctx, t, bs, name); n < 2 {
			t.Fatalf("%d of the lock's 3 keys sit on a quorum, want at least 2", n)
		}
		if _, _, err := b.TryWithContext(ctx, name); !errors.Is(err, rueidislock.ErrNotLocked) {
			t.Fatalf("TryWithContext through the other proxy while held = %v, want ErrNotLocked", err)
		}
		time.Sleep(9 * time.Second)
		if lctx.Err() != nil {
			t.Fatalf("the lock was lost within 9 s at a 4 s validity: %v", context.Cause(lctx))
		}
		if n := rueidisKeysHeld(ctx, t, bs, name); n < 2 {
			t.Fatalf("after 9 s, %d of the lock's 3 keys sit on a quorum, want at least 2", n)
		}
		if n := countAbove(backendPTTLs(ctx, t, bs, "rueidislock:0:"+name), 0); n < interopQuorum {
			t.Fatalf("after 9 s, %d backends hold rueidislock:0:%s with a ttl, want at least %d", n, name, interopQuorum)
		}
		cancel()
		rueidisKeysGone(ctx, t, bs, name)
		_, cancelB, err := b.TryWithContext(ctx, name)
		if err != nil {
			t.Fatalf("TryWithContext after the release: %v", err)
		}
		cancelB()
	})

	// ForceWithContext through the other proxy takes the lock over (SET
	// PXAT by vote); the old holder learns it through the invalidation,
	// well before its next extend (10 s), and its release leaves the new
	// holder's keys alone.
	t.Run("force-stale-release", func(t *testing.T) {
		const name = "forced"
		a := newRueidisLocker(t, pa.Addr(), 20*time.Second, nil)
		b := newRueidisLocker(t, pb.Addr(), 20*time.Second, nil)
		actx, cancelA, err := a.WithContext(ctx, name)
		if err != nil {
			t.Fatalf("WithContext: %v", err)
		}
		start := time.Now()
		bctx, cancelB, err := b.ForceWithContext(ctx, name)
		if err != nil {
			t.Fatalf("ForceWithContext: %v", err)
		}
		select {
		case <-actx.Done():
			t.Logf("the old holder lost the lock %v after the take-over", time.Since(start).Round(time.Millisecond))
		case <-time.After(5 * time.Second):
			t.Fatal("the old holder was not told within 5 s that its lock was taken over")
		}
		cancelA()
		if n := rueidisKeysHeld(ctx, t, bs, name); n < 2 {
			t.Fatalf("after the stale release, %d of the new holder's keys sit on a quorum, want at least 2", n)
		}
		if bctx.Err() != nil {
			t.Fatalf("the new holder lost its lock: %v", context.Cause(bctx))
		}
		cancelB()
		rueidisKeysGone(ctx, t, bs, name)
	})

	// The holder's proxy is killed: nothing extends or releases its keys,
	// and a waiter on another proxy is woken by their expiry.
	t.Run("release-after-expiry", func(t *testing.T) {
		const name = "expiring"
		const validity = 3 * time.Second
		pc := startProxy(t, rs, "")
		h := newRueidisLocker(t, pc.Addr(), validity, nil)
		w := newRueidisLocker(t, pa.Addr(), validity, nil)
		if _, _, err := h.WithContext(ctx, name); err != nil {
			t.Fatalf("WithContext: %v", err)
		}
		got := make(chan error, 1)
		var acquired time.Time
		var cancelW context.CancelFunc
		wctx, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop() // after the checks: it ends the lock taken under it
		go func() {
			var err error
			_, cancelW, err = w.WithContext(wctx, name)
			acquired = time.Now()
			got <- err
		}()
		time.Sleep(500 * time.Millisecond)
		killed := time.Now()
		pc.kill()
		if err := <-got; err != nil {
			t.Fatalf("the waiter's WithContext: %v", err)
		}
		took := acquired.Sub(killed)
		t.Logf("the waiter took the lock %v after the holder's proxy was killed (validity %v)", took.Round(time.Millisecond), validity)
		if took > validity+5*time.Second {
			t.Errorf("the waiter took %v, want within the validity and 5 s", took)
		}
		if n := rueidisKeysHeld(ctx, t, bs, name); n < 2 {
			t.Errorf("%d of the new holder's keys sit on a quorum, want at least 2", n)
		}
		cancelW()
	})

	// The hand-off from a holder on one proxy to a waiter on the other,
	// woken by the invalidation, against the same with client-side caching
	// off (DisableCache: the waiter polls every TryNextAfter, 1 s here).
	t.Run("handoff", func(t *testing.T) {
		message := handoffRounds(ctx, t, bs, "handoff-message",
			newRueidisLocker(t, pa.Addr(), 5*time.Second, nil),
			newRueidisLocker(t, pb.Addr(), 5*time.Second, nil))
		requirePrompt(t, "rueidislock, holder on proxy A, waiter on proxy B, invalidation", message, len(message), 5*time.Second)
		polling := func(o *rueidislock.LockerOption) {
			o.ClientOption.DisableCache = true
			o.TryNextAfter = time.Second
		}
		polled := handoffRounds(ctx, t, bs, "handoff-polling",
			newRueidisLocker(t, pa.Addr(), 5*time.Second, polling),
			newRueidisLocker(t, pb.Addr(), 5*time.Second, polling))
		requirePrompt(t, "rueidislock, same, caching off: polling every 1 s", polled, len(polled), 5*time.Second)
	})
}

// handoffRounds hands the lock name from holder to a waiting waiter five
// times and returns how long after each release the waiter held it. Each
// side waits at most 30 s (the lock's keys expire within 5 s of a holder
// that stops extending them); a round that fails says where the keys stood.
func handoffRounds(ctx context.Context, t *testing.T, bs []*redis.Client, name string, holder, waiter rueidislock.Locker) []time.Duration {
	t.Helper()
	var gaps []time.Duration
	for r := range 5 {
		hctx, stopH := context.WithTimeout(ctx, 30*time.Second)
		_, cancelH, err := holder.WithContext(hctx, name)
		if err != nil {
			stopH()
			t.Fatalf("round %d: the holder's WithContext: %v; the lock's keys: %s", r, err, rueidisKeyState(ctx, bs, name))
		}
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			wctx, stop := context.WithTimeout(ctx, 30*time.Second)
			defer stop()
			_, cancel, err := waiter.WithContext(wctx, name)
			if err != nil {
				errc <- err
				return
			}
			got <- time.Now()
			cancel()
		}()
		time.Sleep(500 * time.Millisecond) // the waiter's attempt found it held
		released := time.Now()
		cancelH()
		stopH()
		select {
		case at := <-got:
			gaps = append(gaps, at.Sub(released))
		case err := <-errc:
			t.Fatalf("round %d: the waiter's WithContext: %v; the lock's keys: %s", r, err, rueidisKeyState(ctx, bs, name))
		}
	}
	return gaps
}

// rueidisKeyState describes the lock's keys on each backend: value and
// remaining ttl, for a failure message.
func rueidisKeyState(ctx context.Context, bs []*redis.Client, name string) string {
	var sb strings.Builder
	for i := range 3 {
		key := fmt.Sprintf("rueidislock:%d:%s", i, name)
		fmt.Fprintf(&sb, "\n  %s:", key)
		for _, b := range bs {
			v, err := b.Get(ctx, key).Result()
			pttl, _ := b.PTTL(ctx, key).Result()
			switch {
			case errors.Is(err, redis.Nil):
				sb.WriteString(" -")
			case err != nil:
				fmt.Fprintf(&sb, " (%v)", err)
			default:
				fmt.Fprintf(&sb, " %s/%v", v, pttl)
			}
		}
	}
	return sb.String()
}
