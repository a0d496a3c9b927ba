package lease

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

func TestForceRelease(t *testing.T) {
	m, mrs := newManager(t, Options{MaxHold: time.Hour})
	ctx := context.Background()
	o := NewOwner(1, OwnerHooks{Lost: func(key, why string) {}})
	if _, err := m.Acquire(ctx, o, sessionReq("s")); err != nil {
		t.Fatal(err)
	}
	if h, ok := m.HeldBy("s"); !ok || h.OwnerID != 1 || !h.Session {
		t.Fatalf("HeldBy = %+v, %v", h, ok)
	}
	if ok, err := m.ForceRelease(ctx, "s", "ops@test"); err != nil || !ok {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	if n := holders(mrs, "s"); n > 1 || m.Sessions() != 0 { // the last backend's delete may follow the quorum's answer
		t.Fatalf("after ForceRelease: on %d backends, %d sessions", n, m.Sessions())
	}
	if _, ok := m.HeldBy("s"); ok {
		t.Fatal("HeldBy still names a holder")
	}
	if ev := m.locker.Events().Last(1); len(ev) != 1 || ev[0].Kind != redlock.EventForceReleased || ev[0].Subject != "s" || ev[0].Detail != "by ops@test" {
		t.Fatalf("events: %+v", ev)
	}
	if ok, err := m.ForceRelease(ctx, "s", "ops@test"); err != nil || ok {
		t.Fatalf("ForceRelease of a free key = %v, %v", ok, err)
	}
	// A key of another type (a library's hash lock) is deleted.
	for _, mr := range mrs {
		mr.HSet("h", "owner", "1")
	}
	if ok, err := m.ForceRelease(ctx, "h", "ops@test"); err != nil || !ok || holders(mrs, "h") > 1 {
		t.Fatalf("ForceRelease of a hash = %v, %v; on %d backends", ok, err, holders(mrs, "h"))
	}
}

func TestHotKeys(t *testing.T) {
	m, _ := newManager(t, Options{})
	ctx := context.Background()
	o := NewOwner(1, OwnerHooks{})
	for _, k := range []string{"a", "b"} {
		if _, err := m.Acquire(ctx, o, lockReq(k)); err != nil {
			t.Fatal(err)
		}
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = m.Acquire(waitCtx, NewOwner(2, OwnerHooks{}), LockRequest{Keys: []string{"b"}, Token: "w", TTL: ttl, Wait: time.Minute})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for m.Waiters() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	hot := m.HotKeys(5)
	if len(hot) != 2 || hot[0].Key != "b" || hot[0].Waiters != 1 || !hot[0].Held || hot[1].Key != "a" {
		t.Fatalf("HotKeys = %+v", hot)
	}
	if one := m.HotKeys(1); len(one) != 1 || one[0].Key != "b" {
		t.Fatalf("HotKeys(1) = %+v", one)
	}
	cancel()
	<-done
}

// TestForceReleaseOfAnMLOCKKey: a force release of one key of a lock of
// several keys granted here releases the lock's every key, not that one
// only (which left the others held, no longer known as one lock).
func TestForceReleaseOfAnMLOCKKey(t *testing.T) {
	m, mrs := newManager(t, Options{})
	ctx := context.Background()
	o := NewOwner(1, OwnerHooks{Lost: func(key, why string) {}})
	if _, err := m.Acquire(ctx, o, LockRequest{Keys: []string{"ma", "mb"}, Token: "t", TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.ForceRelease(ctx, "ma", "ops@test"); err != nil || !ok {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	testkit.Eventually(t, 10*time.Second, "both keys of the lock released on every backend", func() bool {
		return holders(mrs, "ma") == 0 && holders(mrs, "mb") == 0
	})
}
