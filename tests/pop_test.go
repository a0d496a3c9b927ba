package tests

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// blockedClients is the number of clients blocked on r (INFO clients).
func blockedClients(ctx context.Context, r *redisProc) int {
	info, err := r.Client().Info(ctx, "clients").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// noneBlocked waits until no backend has a client blocked.
func noneBlocked(ctx context.Context, t *testing.T, rs []*redisProc, what string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, func() bool {
		for _, r := range rs {
			if blockedClients(ctx, r) != 0 {
				return false
			}
		}
		return true
	})
}

// TestBlockingPopSignal: a python-redis-lock style waiter (BLPOP on the
// lock's signal list) is woken at once by a release that pushes the
// signal through another proxy; the copies of the signal on the other
// backends are consumed with it, and nothing stays blocked.
func TestBlockingPopSignal(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	pa, pb := startProxy(t, rs, ""), startProxy(t, rs, "")
	ctx := testCtx(t, time.Minute)
	waiter := pa.Client(&redis.Options{ReadTimeout: 30 * time.Second})
	releaser := pb.Client(nil)

	woke := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		v, err := waiter.BLPop(ctx, 20*time.Second, "lock-signal:job").Result()
		if err == nil && (len(v) != 2 || v[0] != "lock-signal:job" || v[1] != "1") {
			err = errors.New("BLPOP = " + strings.Join(v, " "))
		}
		woke <- time.Now()
		errc <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the waiter blocked on every backend", func() bool {
		for _, r := range rs {
			if blockedClients(ctx, r) != 1 {
				return false
			}
		}
		return true
	})
	released := time.Now()
	// What python-redis-lock's release script does with the signal list.
	if err := releaser.Del(ctx, "lock-signal:job").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := releaser.LPush(ctx, "lock-signal:job", "1").Result(); err != nil || n != 1 {
		t.Fatalf("LPUSH through the other proxy = %d, %v", n, err)
	}
	if err := releaser.PExpire(ctx, "lock-signal:job", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-woke:
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if d := at.Sub(released); d > 2*time.Second {
			t.Errorf("the waiter woke %v after the release, want at once", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	noneBlocked(ctx, t, rs, "every backend's pop ended")
	// A copy that reached a backend after its pop was cancelled stays
	// there (a stale signal, docs/compatibility.md); the list's 1 s expiry,
	// sent through the proxy, reached every backend and ends it.
	testkit.Eventually(t, 10*time.Second, "stale copies of the signal to expire with the list", func() bool {
		for _, r := range rs {
			if n, err := r.Client().Exists(ctx, "lock-signal:job").Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})

	// Nothing pushed: the timeout answers nil.
	start := time.Now()
	if _, err := waiter.BLPop(ctx, 500*time.Millisecond, "lock-signal:job").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("BLPOP with nothing pushed = %v, want nil after the timeout", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("BLPOP 0.5 returned after %v", d)
	}
	noneBlocked(ctx, t, rs, "the timed-out pops ended")
}

// TestBlockingPopClientLeaves: a client that leaves while blocked has its
// pops cancelled on every backend, and a later push is not lost.
func TestBlockingPopClientLeaves(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, time.Minute)
	conn := testkit.Dial(t, p.Addr())
	conn.SendCmd("BRPOP", "q", "0")
	testkit.Eventually(t, 10*time.Second, "the pop blocked on every backend", func() bool {
		for _, r := range rs {
			if blockedClients(ctx, r) != 1 {
				return false
			}
		}
		return true
	})
	conn.Close()
	noneBlocked(ctx, t, rs, "the pops cancelled after the client left")
	c := p.Client(nil)
	if err := c.RPush(ctx, "q", "kept").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.BRPop(ctx, 5*time.Second, "q").Result(); err != nil || v[1] != "kept" {
		t.Fatalf("BRPOP after the push = %v, %v", v, err)
	}
}

// TestPopCount: LPOP/RPOP with a count, as go-redis's LPopCount and
// RPopCount send them, answer through the proxy as Redis 7 does: the
// elements popped, in order, and nil for a missing key, in RESP3 and
// RESP2. A backend whose list differs gets back, in its order, what it
// popped past the elements answered.
func TestPopCount(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, time.Minute)
	c, c2 := p.Client(nil), p.Client(&redis.Options{Protocol: 2})
	if err := c.RPush(ctx, "l", "a", "b", "c").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rs[4].Client().LSet(ctx, "l", 1, "x").Err(); err != nil { // rs[4]: a x c
		t.Fatal(err)
	}
	if v, err := c.LPopCount(ctx, "l", 2).Result(); err != nil || strings.Join(v, " ") != "a b" {
		t.Fatalf("LPOP l 2 = %q, %v; want [a b]", v, err)
	}
	for i, r := range rs {
		want := "c"
		if i == 4 {
			want = "x c" // its x pushed back in front of its c
		}
		if v, err := r.Client().LRange(ctx, "l", 0, -1).Result(); err != nil || strings.Join(v, " ") != want {
			t.Errorf("backend %d holds %q, %v; want %s", i, v, err, want)
		}
	}
	// Every backend's c, then the x only one backend popped: as with a
	// pop without count, an element a backend popped is answered.
	if v, err := c2.RPopCount(ctx, "l", 5).Result(); err != nil || strings.Join(v, " ") != "c x" {
		t.Fatalf("RPOP l 5 = %q, %v; want [c x]", v, err)
	}
	for _, cl := range []*redis.Client{c, c2} {
		if v, err := cl.LPopCount(ctx, "l", 2).Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("LPOP of a missing key with a count = %q, %v; want nil", v, err)
		}
	}
	if err := c.LPopCount(ctx, "l", -1).Err(); err == nil || err.Error() != "ERR value is out of range, must be positive" {
		t.Fatalf("LPOP l -1: %v", err)
	}
}
