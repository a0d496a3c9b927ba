package redlock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestFenceIncreasesAcrossHolders(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	var last int64
	for i := range 5 {
		tok := "t" + strconv.Itoa(i)
		l, err := c.r.AcquireFenced(ctx, "res", tok, 5*time.Second)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if l.Fence <= last {
			t.Fatalf("round %d: fence %d after %d", i, l.Fence, last)
		}
		last = l.Fence
		// The fence was written back to a quorum while the key held our token.
		raised := 0
		for j := range c.mrs {
			if v, _ := strconv.ParseInt(c.value(j, FenceKey), 10, 64); v >= l.Fence {
				raised++
			}
		}
		if raised < 3 {
			t.Fatalf("round %d: fence %d reached %d backends", i, l.Fence, raised)
		}
		// Held: another acquisition fails but still counts on the nodes.
		if _, err := c.r.AcquireFenced(ctx, "res", "other", 5*time.Second); !errors.Is(err, ErrHeld) {
			t.Fatalf("round %d: second acquire = %v, want ErrHeld", i, err)
		}
		if err := c.r.Release(ctx, "res", tok); err != nil {
			t.Fatalf("round %d: release: %v", i, err)
		}
	}
}

// TestFenceSurvivesBackendsLosingCounters: every backend loses its data
// (restarted empty); the process's high-water mark keeps fences going up.
func TestFenceSurvivesBackendsLosingCounters(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	l1, err := c.r.AcquireFenced(ctx, "res", "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.mrs {
		m.FlushAll()
	}
	l2, err := c.r.AcquireFenced(ctx, "res", "b", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence <= l1.Fence {
		t.Fatalf("fence went from %d to %d after the backends lost their counters", l1.Fence, l2.Fence)
	}
}

// TestFenceWriteBackNeedsQuorum: every node grants the lock, but the
// write-back of the fence fails on 3 of 5: the acquisition fails with
// ErrNoQuorum and is rolled back, so no node keeps the key.
func TestFenceWriteBackNeedsQuorum(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	if _, err := c.r.AcquireFenced(ctx, FenceKey, "a", time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("acquire of the fence key = %v, want ErrInvalid", err)
	}
	for _, n := range c.nodes[:3] {
		n.failScript.Store(fenceWriteBackScript)
	}
	if _, err := c.r.AcquireFenced(ctx, "res", "a", 20*time.Second); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("acquire whose fence write-back reached 2 of 5 = %v, want ErrNoQuorum", err)
	}
	c.wait(t)
	if n := c.holders("res", "a"); n != 0 {
		t.Fatalf("%d nodes still hold the failed lock", n)
	}
	for _, n := range c.nodes[:3] {
		n.failScript.Store(nil)
	}
	if _, err := c.r.AcquireFenced(ctx, "res", "b", 20*time.Second); err != nil {
		t.Fatalf("acquire after the fault cleared = %v", err)
	}
}

// TestObserveCall: every backend call is reported with its address.
func TestObserveCall(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	c := newCluster(t, 3, Options{ObserveCall: func(addr string, d time.Duration, err error) {
		mu.Lock()
		seen[addr]++
		mu.Unlock()
	}})
	if _, err := c.r.Acquire(context.Background(), "obs", "t", time.Second); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("calls observed on %d backends, want 3: %v", len(seen), seen)
	}
}
