package commands

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

func TestRegistryQueueFIFO(t *testing.T) {
	var r registry
	ws := make([]*waiter, 3)
	for i := range ws {
		ws[i] = r.enqueue("k")
	}
	signalled := func(w *waiter) bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	if !signalled(ws[0]) || signalled(ws[1]) || signalled(ws[2]) {
		t.Fatal("only the head is signalled on enqueue")
	}
	r.leave("k", ws[1]) // a waiter in the middle leaves: nobody is woken
	if signalled(ws[2]) {
		t.Fatal("leaving from the middle woke the tail")
	}
	r.released("k", "t") // a release wakes the head only
	if !signalled(ws[0]) || signalled(ws[2]) {
		t.Fatal("a release must wake the head only")
	}
	r.leave("k", ws[0])
	if !r.isHead("k", ws[2]) || !signalled(ws[2]) {
		t.Fatal("the next waiter must become the head and be woken")
	}
	r.leave("k", ws[2])
	if r.waiting("k") != 0 || len(r.queues) != 0 {
		t.Fatal("queue not cleaned up")
	}
}

func TestWaiterLeavesWhenClientCloses(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	holder := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if _, ok := d.Do(context.Background(), holder, args("LOCK", "w", "10000")).(Array); !ok {
		t.Fatal("LOCK failed")
	}
	waiter := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	done := make(chan string, 1)
	go func() { done <- do(d, waiter, "LOCK", "w", "10000", "WAIT", "2000") }()
	testkit.Eventually(t, 5*time.Second, "the waiter to queue", func() bool { return d.LockWaiters() == 1 })
	start := time.Now()
	d.CloseClient(waiter)
	if got := <-done; got != "*-1\r\n" {
		t.Fatalf("closed waiter got %q", got)
	}
	// At once, not when its WAIT (2 s, max_wait) runs out; 1 s is a
	// generous bound for "at once" on a loaded machine.
	if el := time.Since(start); el > time.Second || d.reg.waiting("w") != 0 {
		t.Fatalf("closed waiter left after %v; %d still queued", el, d.reg.waiting("w"))
	}
	// A LOCK without WAIT does not jump a queue.
	w2 := d.NewClient("127.0.0.1:4", "127.0.0.1:2")
	go func() { done <- do(d, w2, "LOCK", "w", "10000", "WAIT", "2000") }()
	testkit.Eventually(t, 5*time.Second, "the second waiter to queue", func() bool { return d.LockWaiters() == 1 })
	if got := do(d, holder, "LOCK", "w", "10000"); got != "*-1\r\n" {
		t.Fatalf("LOCK without WAIT past a queue = %q", got)
	}
	d.CloseClient(w2)
	<-done
}

// infoInt reads an integer field of INFO section through c.
func infoInt(t *testing.T, d *Dispatcher, c *Client, section, field string) int64 {
	t.Helper()
	info := do(d, c, "INFO", section)
	_, rest, ok := strings.Cut(info, "\r\n"+field+":")
	if !ok {
		t.Fatalf("INFO %s has no %s: %q", section, field, info)
	}
	v, _, _ := strings.Cut(rest, "\r\n")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("INFO %s: %s:%s", section, field, v)
	}
	return n
}

// TestSessionLifecycle: a SESSION lock is renewed while its client lives,
// shows as a session lock, and is released when the client closes. Its
// ttl is 2 s (renewed every 667 ms): a shorter one gives each backend call
// a deadline (5% of the ttl) that a loaded machine misses, and a missed
// renewal loses the lock.
func TestSessionLifecycle(t *testing.T) {
	d, mrs := newTestDispatcher(t, 3, "")
	d.opts.MaxHold = time.Hour
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	a, ok := d.Do(context.Background(), c, args("LOCK", "s", "2000", "SESSION")).(Array)
	if !ok {
		t.Fatal("LOCK SESSION failed")
	}
	token := string(a[0].(BulkString))
	testkit.Eventually(t, 10*time.Second, "two renewals of the session lock", func() bool {
		return infoInt(t, d, c, "locks", "extend_ok") >= 2
	})
	if got := do(d, c, "LOCKINFO", "s"); !strings.Contains(got, "$7\r\nsession\r\n:1\r\n") {
		t.Fatalf("LOCKINFO of a renewed session lock = %q", got)
	}
	if got := do(d, c, "LOCKS"); strings.Contains(got, token) || !strings.Contains(got, "$1\r\ns\r\n") {
		t.Fatalf("LOCKS = %q", got)
	}
	d.CloseClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// Released on a quorum before Shutdown returned; the last backend's
	// delete may land a moment later.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		left := 0
		for _, m := range mrs {
			if m.Exists("s") {
				left++
			}
		}
		if left == 0 {
			break
		}
		if left > 1 || time.Now().After(deadline) {
			t.Fatalf("session lock still on %d backends after its client closed", left)
		}
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestLockLostRESP2(t *testing.T) {
	d, mrs := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if _, ok := d.Do(context.Background(), c, args("LOCK", "l", "2000", "SESSION")).(Array); !ok {
		t.Fatal("LOCK SESSION failed")
	}
	for _, m := range mrs {
		m.Del("l") // stolen behind the proxy's back: the renewal finds it gone
	}
	testkit.Eventually(t, 10*time.Second, "the renewal (every 667 ms) to notice the loss", func() bool { return c.lostN.Load() != 0 })
	if got := do(d, c, "PING"); got != "+PONG\r\n" {
		t.Fatalf("a command on another key = %q", got)
	}
	if got := do(d, c, "UNLOCK", "l", "x"); !strings.HasPrefix(got, "-LOCKLOST lock 'l' was lost") {
		t.Fatalf("next command on the key = %q", got)
	}
	if got := do(d, c, "UNLOCK", "l", "x"); got != ":0\r\n" {
		t.Fatalf("LOCKLOST is told once; then %q", got)
	}
}

// TestSessionEndsWithAnyRelease: a SESSION lock released by DELIFEQ (or
// any other releasing command) stops renewing: the client is not told
// later that the lock it released was lost.
func TestSessionEndsWithAnyRelease(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	d.opts.MaxHold = time.Hour
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	r := d.Do(context.Background(), c, args("LOCK", "s", "2000", "SESSION"))
	a, ok := r.(Array)
	if !ok {
		t.Fatalf("LOCK SESSION = %#v", r)
	}
	if got := do(d, c, "DELIFEQ", "s", string(a[0].(BulkString))); got != ":1\r\n" {
		t.Fatalf("DELIFEQ = %q", got)
	}
	// The renewal goroutine has ended (the dispatcher's background work is
	// done), so no renewal can run later and find the lock gone: no need
	// to sleep past renewal periods.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.bg.Wait(ctx); err != nil {
		t.Fatalf("the session's renewal still runs after DELIFEQ released the lock: %v", err)
	}
	if got := do(d, c, "GET", "s"); got != "$-1\r\n" {
		t.Fatalf("GET after releasing the SESSION lock with DELIFEQ = %q, want nil (no lock-lost notice)", got)
	}
	if n := d.SessionLocks(); n != 0 {
		t.Fatalf("%d session locks still renewing", n)
	}
}
