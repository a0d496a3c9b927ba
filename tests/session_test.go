package tests

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// rawLock sends LOCK key ttl [extra…] on a raw connection and returns the
// token; it fails the test unless the lock is granted.
func rawLock(t testing.TB, c *testkit.Conn, key, ttl string, extra ...string) string {
	t.Helper()
	v := c.Do(append([]string{"LOCK", key, ttl}, extra...)...)
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		t.Fatalf("LOCK %s %s %v = %#v, want [token validity fence]", key, ttl, extra, v)
	}
	tok, _ := a[0].(string)
	if tok == "" {
		t.Fatalf("LOCK %s: no token in %#v", key, v)
	}
	return tok
}

// hello3 switches a raw connection to RESP3.
func hello3(t testing.TB, c *testkit.Conn) {
	t.Helper()
	if _, ok := c.Do("HELLO", "3").(map[any]any); !ok {
		t.Fatal("HELLO 3 did not answer a map")
	}
}

// waitHolders polls the backends until exactly want of them hold key with
// token, and returns how long that took; it fails after limit.
func waitHolders(ctx context.Context, t testing.TB, rs []*redisProc, key, token string, want int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if holders(ctx, t, rs, key, token) == want {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("key %q: %d backends hold the token after %v, want %d", key, holders(ctx, t, rs, key, token), limit, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSessionRenewedAndReleasedOnClose: a SESSION lock with a 2 s ttl
// outlives 3 s of idle connection (the wait is the point), and is gone from
// the backends soon after the client's socket closes without QUIT. The
// bound asserted is a generous 1 s; the test logs what it saw (a few ms).
func TestSessionRenewedAndReleasedOnClose(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 30*time.Second)

	c := testkit.Dial(t, p.Addr())
	tok := rawLock(t, c, "sess", "2000", "SESSION")
	time.Sleep(3 * time.Second) // idle for longer than the ttl
	if n := holders(ctx, t, rs, "sess", tok); n < 3 {
		t.Fatalf("after 3s idle a SESSION lock with ttl 2s is on %d backends, want a quorum", n)
	}
	other := p.Client(nil)
	if _, err := lock(ctx, t, other, "sess", 10000); err == nil {
		t.Fatal("another client got the SESSION lock while its connection lived")
	}

	_ = c.Close() // no QUIT: the socket just closes
	took := waitHolders(ctx, t, rs, "sess", tok, 0, 5*time.Second)
	t.Logf("SESSION lock gone from every backend %v after the socket closed", took)
	if took > time.Second {
		t.Fatalf("SESSION lock released %v after the socket closed, want ≤ 1s", took)
	}
}

// TestSessionReleasedOnSIGTERM: a proxy shutting down releases its
// SESSION locks before it exits (within a generous 1 s; the test logs what
// it saw).
func TestSessionReleasedOnSIGTERM(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 30*time.Second)

	c := testkit.Dial(t, p.Addr())
	tok := rawLock(t, c, "term", "10000", "SESSION")
	if n := holders(ctx, t, rs, "term", tok); n < 3 {
		t.Fatalf("SESSION lock on %d backends, want a quorum", n)
	}
	p.Signal(syscall.SIGTERM)
	took := waitHolders(ctx, t, rs, "term", tok, 0, 5*time.Second)
	t.Logf("SESSION lock gone from every backend %v after SIGTERM", took)
	if took > time.Second {
		t.Fatalf("SESSION lock released %v after SIGTERM, want ≤ 1s", took)
	}
	if code := p.Wait(5 * time.Second); code != 0 {
		t.Fatalf("proxy exit code %d after SIGTERM, want 0", code)
	}
}

// TestSessionLockLostPush: when a majority of backends stops under a
// SESSION lock, the renewal fails and a RESP3 holder gets a lock-lost push
// at once, before the lock's ttl (2 s) could have run out; a RESP2 holder
// is told by an error on its next command on the key.
func TestSessionLockLostPush(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	info := testkit.Dial(t, p.Addr())
	hello3(t, info)

	c3 := testkit.Dial(t, p.Addr())
	hello3(t, c3)
	rawLock(t, c3, "lost3", "2000", "SESSION")
	c2 := testkit.Dial(t, p.Addr())
	rawLock(t, c2, "lost2", "2000", "SESSION")

	stopped := time.Now()
	for _, r := range rs[:3] {
		r.Stop()
	}
	t.Cleanup(func() {
		for _, r := range rs[:3] {
			r.Cont()
		}
	})
	v, err := c3.TryReadReply(5 * time.Second)
	if err != nil {
		t.Fatalf("no push within 5s of stopping 3 of 5 backends: %v", err)
	}
	push, ok := v.(testkit.Push)
	if !ok || len(push) < 2 || push[0] != "lock-lost" || push[1] != "lost3" {
		t.Fatalf("got %#v, want a push [lock-lost lost3 …]", v)
	}
	t.Logf("push %v arrived %v after the backends stopped", push, time.Since(stopped))
	if d := time.Since(stopped); d > 2*time.Second {
		t.Fatalf("push arrived %v after the backends stopped; the renewal runs every 667ms, and the ttl is 2s", d)
	}

	// The RESP2 lock's renewal has failed too once the proxy no longer
	// lists it (it marks the loss for the client first).
	testkit.Eventually(t, 5*time.Second, "the RESP2 session lock to be lost", func() bool {
		_, listed := locksHeld(t, info)["lost2"]
		return !listed
	})
	got := c2.Do("EXTEND", "lost2", "whatever", "2000")
	e, ok := got.(testkit.Error)
	if !ok || !strings.HasPrefix(string(e), "LOCKLOST lock 'lost2' was lost") {
		t.Fatalf("RESP2 holder's next command on the key = %#v, want -LOCKLOST …", got)
	}
	if got := c2.Do("PING"); got != "PONG" {
		t.Fatalf("PING after LOCKLOST = %#v", got)
	}
}

// TestSessionMaxHold: renewal stops at max_hold; the lock then expires and
// its RESP3 holder is told: between max_hold and max_hold + ttl after the
// grant (with a generous second for a loaded machine).
func TestSessionMaxHold(t *testing.T) {
	t.Parallel()
	const maxHold, ttl = time.Second, 2 * time.Second
	rs := startCluster(t, 5)
	p := startProxy(t, rs, `max_hold = "1s"`)
	ctx := testCtx(t, 30*time.Second)

	c := testkit.Dial(t, p.Addr())
	hello3(t, c)
	start := time.Now()
	tok := rawLock(t, c, "hold", "2000", "SESSION")
	v, err := c.TryReadReply(maxHold + ttl + 3*time.Second)
	if err != nil {
		t.Fatalf("no push after max_hold: %v", err)
	}
	push, ok := v.(testkit.Push)
	if !ok || len(push) < 3 || push[0] != "lock-lost" || push[1] != "hold" || push[2] != "max_hold reached" {
		t.Fatalf("got %#v, want [lock-lost hold max_hold reached]", v)
	}
	held := time.Since(start)
	t.Logf("held %v with max_hold %v and ttl %v", held, maxHold, ttl)
	if held < maxHold || held > maxHold+ttl+time.Second {
		t.Fatalf("lock ended after %v, want between max_hold (%v) and max_hold + ttl (%v)", held, maxHold, maxHold+ttl)
	}
	// Told first, then released (or expired) on the backends.
	waitHolders(ctx, t, rs, "hold", tok, 0, 5*time.Second)
}
