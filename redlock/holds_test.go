package redlock

import (
	"context"
	"errors"
	"testing"
)

// TestHoldsRecord: a hold is written to a quorum under its owner; another
// proxy cannot overwrite it unless it passes the owner it saw (a claim);
// a hand-over marks the owner's holds and counts them; only the owner
// drops its hold. Bad holds are refused.
func TestHoldsRecord(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	const svc = "mymaster"
	key := HoldsKey(svc)
	// on counts the nodes whose field of k is f: a quorum write leaves
	// the last node's call in flight.
	on := func(k, f string) int {
		n := 0
		for _, mr := range c.mrs {
			if mr.Exists(key) && mr.HGet(key, k) == f {
				n++
			}
		}
		return n
	}

	a := Hold{Key: "lock", Owner: "proxyA", Digest: "d1"}
	if err := c.r.SetHold(ctx, svc, a, "proxyA"); err != nil {
		t.Fatal(err)
	}
	if err := c.r.SetHold(ctx, svc, Hold{Key: "other", Owner: "proxyA", Deadline: 42, Digest: "d2"}, "proxyA"); err != nil {
		t.Fatal(err)
	}
	if n := on("lock", "proxyA 0 d1"); n < 2 {
		t.Fatalf("the hold is on %d nodes", n)
	}
	// B may not take A's hold without naming A.
	b := Hold{Key: "lock", Owner: "proxyB", Digest: "d1"}
	if err := c.r.SetHold(ctx, svc, b, "proxyB"); !errors.Is(err, ErrHeld) {
		t.Fatalf("SetHold over another owner = %v, want ErrHeld", err)
	}
	if err := c.r.DropHold(ctx, svc, "lock", "proxyB"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("DropHold of another owner's hold = %v, want ErrNotHeld", err)
	}
	// A hands over: both its holds, counted.
	if n, err := c.r.HandOverHolds(ctx, svc, "proxyA"); err != nil || n != 2 {
		t.Fatalf("HandOverHolds = %d, %v; want 2", n, err)
	}
	if n := on("other", "- 42 d2"); n < 2 {
		t.Fatalf("handed over on %d nodes", n)
	}
	// B claims the handed-over hold.
	if err := c.r.SetHold(ctx, svc, b, HandedOver); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if n, err := c.r.HandOverHolds(ctx, svc, "proxyA"); err != nil || n != 0 {
		t.Fatalf("HandOverHolds again = %d, %v; want 0", n, err)
	}
	if err := c.r.DropHold(ctx, svc, "lock", "proxyB"); err != nil {
		t.Fatal(err)
	}
	if n := on("lock", "proxyB 0 d1"); n > 1 {
		t.Fatalf("the dropped hold is still on %d nodes", n)
	}
	for _, bad := range []Hold{{Owner: "x", Digest: "d"}, {Key: "k", Digest: "d"}, {Key: "k", Owner: "a b", Digest: "d"}, {Key: "k", Owner: "x"}} {
		if err := c.r.SetHold(ctx, svc, bad, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("SetHold(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := c.r.HandOverHolds(ctx, svc, HandedOver); !errors.Is(err, ErrInvalid) {
		t.Fatalf("HandOverHolds(-) = %v, want ErrInvalid", err)
	}
	if h, err := parseHold("k", "proxyA 42 d"); err != nil || h != (Hold{Key: "k", Owner: "proxyA", Deadline: 42, Digest: "d"}) {
		t.Fatalf("parseHold = %+v, %v", h, err)
	}
	for _, bad := range []string{"", "a b", "a -1 d", "a x d", "a 1 d e"} {
		if _, err := parseHold("k", bad); err == nil {
			t.Fatalf("parseHold(%q) accepted", bad)
		}
	}
}
