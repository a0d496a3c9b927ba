package commands

import (
	"context"
	"strings"
	"testing"
	"time"
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
	for d.reg.waiting("w") != 1 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	d.CloseClient(waiter)
	if got := <-done; got != "*-1\r\n" {
		t.Fatalf("closed waiter got %q", got)
	}
	if el := time.Since(start); el > 500*time.Millisecond || d.reg.waiting("w") != 0 {
		t.Fatalf("closed waiter left after %v; %d still queued", el, d.reg.waiting("w"))
	}
	// A LOCK without WAIT does not jump a queue.
	w2 := d.NewClient("127.0.0.1:4", "127.0.0.1:2")
	go func() { done <- do(d, w2, "LOCK", "w", "10000", "WAIT", "2000") }()
	for d.reg.waiting("w") != 1 {
		time.Sleep(time.Millisecond)
	}
	if got := do(d, holder, "LOCK", "w", "10000"); got != "*-1\r\n" {
		t.Fatalf("LOCK without WAIT past a queue = %q", got)
	}
	d.CloseClient(w2)
	<-done
}

func TestSessionLifecycle(t *testing.T) {
	d, mrs := newTestDispatcher(t, 3, "")
	d.opts.MaxHold = time.Hour
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	a, ok := d.Do(context.Background(), c, args("LOCK", "s", "300", "SESSION")).(Array)
	if !ok {
		t.Fatal("LOCK SESSION failed")
	}
	token := string(a[0].(BulkString))
	time.Sleep(500 * time.Millisecond) // a few renewals
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
	for deadline := time.Now().Add(time.Second); ; time.Sleep(2 * time.Millisecond) {
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
	if _, ok := d.Do(context.Background(), c, args("LOCK", "l", "300", "SESSION")).(Array); !ok {
		t.Fatal("LOCK SESSION failed")
	}
	for _, m := range mrs {
		m.Del("l") // stolen behind the proxy's back: the renewal finds it gone
	}
	deadline := time.Now().Add(2 * time.Second)
	for c.lostN.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("renewal did not notice the loss")
		}
		time.Sleep(5 * time.Millisecond)
	}
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
	r := d.Do(context.Background(), c, args("LOCK", "s", "300", "SESSION"))
	a, ok := r.(Array)
	if !ok {
		t.Fatalf("LOCK SESSION = %#v", r)
	}
	if got := do(d, c, "DELIFEQ", "s", string(a[0].(BulkString))); got != ":1\r\n" {
		t.Fatalf("DELIFEQ = %q", got)
	}
	time.Sleep(400 * time.Millisecond) // past several renewal periods (ttl/3 = 100 ms)
	if got := do(d, c, "GET", "s"); got != "$-1\r\n" {
		t.Fatalf("GET after releasing the SESSION lock with DELIFEQ = %q, want nil (no lock-lost notice)", got)
	}
	if n := d.SessionLocks(); n != 0 {
		t.Fatalf("%d session locks still renewing", n)
	}
}
