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
		l, err := c.r.AcquireFenced(ctx, "res", tok, time.Minute)
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
		if _, err := c.r.AcquireFenced(ctx, "res", "other", time.Minute); !errors.Is(err, ErrHeld) {
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

// counter reads node i's fence counter (0 when absent).
func (c *cluster) counter(i int) int64 {
	v, _ := strconv.ParseInt(c.value(i, FenceKey), 10, 64)
	return v
}

// secondProxy is another Redlock over the same backends as c, with its own
// (empty) high-water mark: another proxy process.
func secondProxy(tb testing.TB, c *cluster) (*Redlock, []*faultyNode) {
	tb.Helper()
	var nodes []Node
	var faulty []*faultyNode
	for _, mr := range c.mrs {
		rn, err := DialNode(mr.Addr())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = rn.Close() })
		fn := &faultyNode{Node: rn}
		nodes = append(nodes, fn)
		faulty = append(faulty, fn)
	}
	r := New(nodes, Options{NodeTimeout: testTimeout, Logger: testLogger(tb)})
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
		defer cancel()
		_ = r.Close(ctx)
	})
	return r, faulty
}

// TestFenceWriteBackRaisesEveryNode: two backends refuse the lock (another
// value holds the key there), three grant it. The write-back still raises
// all five counters to the fence, so it survives on whichever backends
// survive a majority losing its data.
func TestFenceWriteBackRaisesEveryNode(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	if err := c.mrs[0].Set(FenceKey, "50"); err != nil { // the fence comes from here
		t.Fatal(err)
	}
	for _, i := range []int{3, 4} {
		if err := c.mrs[i].Set("res", "someone-else"); err != nil {
			t.Fatal(err)
		}
		c.mrs[i].SetTTL("res", time.Minute)
	}
	l, err := c.r.AcquireFenced(ctx, "res", "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.wait(t) // the write-back's calls after the quorum
	for i := range c.mrs {
		if got := c.counter(i); got < l.Fence {
			t.Errorf("backend %d: counter %d after a grant with fence %d", i, got, l.Fence)
		}
	}
}

// TestFenceReadsEveryNode: three backends lost their counters (restarted
// empty) and answer first; the two that kept theirs answer later. The
// fenced acquire waits for them and issues a fence above their counters:
// deciding at the first quorum would have issued 1.
func TestFenceReadsEveryNode(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	for _, i := range []int{3, 4} {
		if err := c.mrs[i].Set(FenceKey, "100"); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	c.nodes[3].setGated(modeGated, gate)
	c.nodes[4].setGated(modeGated, gate)
	type result struct {
		l   Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.r.AcquireFenced(ctx, "res", "a", 10*time.Second)
		done <- result{l, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("the fenced acquire decided (fence %d, %v) before the two slower backends answered", r.l.Fence, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Fence <= 100 {
		t.Fatalf("fence %d, want above 100, the counter the slower backends kept", r.l.Fence)
	}
}

// TestFenceAcrossProxiesAfterMajorityLoss: proxy A issues a fence; a
// majority of backends then loses its data; proxy B, a process that never
// issued a fence, locks next. B reads the surviving backends' counters
// and issues a larger fence. When the survivors cannot answer B, what B
// learned of A's mark (tier's heartbeat, RaiseFenceHighWater) still keeps
// B's fence above A's.
func TestFenceAcrossProxiesAfterMajorityLoss(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	var last int64
	for i := range 20 { // drive the counters up through A
		l, err := c.r.AcquireFenced(ctx, "res", "a"+strconv.Itoa(i), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.r.Release(ctx, "res", l.Token); err != nil {
			t.Fatal(err)
		}
		last = l.Fence
	}
	c.wait(t)
	b, _ := secondProxy(t, c)
	for _, m := range c.mrs[:3] {
		m.FlushAll()
	}
	l, err := b.AcquireFenced(ctx, "res", "b1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence <= last {
		t.Fatalf("proxy B's fence %d after proxy A's %d and a majority restarting empty", l.Fence, last)
	}
	if err := b.Release(ctx, "res", l.Token); err != nil {
		t.Fatal(err)
	}
	last = l.Fence

	// Again, but the two survivors do not answer B: only the shared mark
	// keeps B's fence up.
	c2 := newCluster(t, 5, Options{})
	for i := range 20 {
		l, err := c2.r.AcquireFenced(ctx, "res", "a"+strconv.Itoa(i), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last = l.Fence
		if err := c2.r.Release(ctx, "res", l.Token); err != nil {
			t.Fatal(err)
		}
	}
	c2.wait(t)
	b2, b2nodes := secondProxy(t, c2)
	for _, m := range c2.mrs[:3] {
		m.FlushAll()
	}
	b2nodes[3].set(modeFail)
	b2nodes[4].set(modeFail)
	b2.RaiseFenceHighWater(c2.r.FenceHighWater())
	l, err = b2.AcquireFenced(ctx, "res", "b2", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence <= last {
		t.Fatalf("proxy B's fence %d after proxy A's %d, with A's mark shared", l.Fence, last)
	}
}

func TestRaiseFenceHighWater(t *testing.T) {
	c := newCluster(t, 3, Options{})
	if c.r.FenceHighWater() != 0 {
		t.Fatalf("a new Redlock's mark is %d", c.r.FenceHighWater())
	}
	if !c.r.RaiseFenceHighWater(41) || c.r.RaiseFenceHighWater(40) || c.r.RaiseFenceHighWater(41) {
		t.Fatal("RaiseFenceHighWater: raised must report only a move up")
	}
	l, err := c.r.AcquireFenced(context.Background(), "res", "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence != 42 || c.r.FenceHighWater() != 42 {
		t.Fatalf("fence %d, mark %d after raising the mark to 41 on fresh backends; want 42, 42", l.Fence, c.r.FenceHighWater())
	}
}

func TestReserved(t *testing.T) {
	for key, want := range map[string]bool{
		FenceKey: true, "redlock-proxy:tier:redlock": true, "redlock-proxy:": true,
		"redlock-proxy": false, "orders:1": false, "Redlock-Proxy:fence": false,
	} {
		if Reserved(key) != want {
			t.Errorf("Reserved(%q) = %v, want %v", key, !want, want)
		}
	}
	c := newCluster(t, 3, Options{})
	if _, err := c.r.AcquireFenced(context.Background(), "redlock-proxy:x", "a", time.Second); err == nil {
		t.Fatal("a fenced acquire of a reserved key succeeded")
	}
}
