package redlock

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"time"
)

func TestAcquireKeys(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	keys := []string{"a", "b", "a"}
	lock, err := c.r.AcquireKeys(ctx, keys, "tok", ttl, IfAbsent)
	if err != nil {
		t.Fatal(err)
	}
	if lock.Key != "a" || !slices.Equal(lock.Keys, keys) || lock.Token != "tok" || lock.Granted < 3 || lock.Validity <= 0 {
		t.Fatalf("lock %+v", lock)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		for _, k := range []string{"a", "b"} {
			if c.value(i, k) != "tok" || mr.TTL(k) != ttl {
				t.Fatalf("node %d key %s: %q ttl %v", i, k, c.value(i, k), mr.TTL(k))
			}
		}
	}
	_, err = c.r.AcquireKeys(ctx, []string{"c", "b"}, "tok2", ttl, IfAbsent)
	mustKind(t, err, ErrHeld)
	c.wait(t)
	if n := c.holders("c", "tok2"); n != 0 {
		t.Fatalf("a refused acquire set c on %d nodes", n)
	}
}

// A node grants every key or none.
func TestAcquireKeysAllOrNothing(t *testing.T) {
	ctx := context.Background()
	for _, held := range []int{2, 3} {
		c := newCluster(t, 5, Options{})
		for i := range held {
			c.mrs[i].Set("b", "other")
		}
		lock, err := c.r.AcquireKeys(ctx, []string{"a", "b"}, "tok", ttl, IfAbsent)
		c.wait(t)
		if held == 2 {
			if err != nil || lock.Granted != 3 {
				t.Fatalf("held on %d: %+v, %v", held, lock, err)
			}
		} else {
			mustKind(t, err, ErrHeld)
		}
		for i := range 5 {
			wantA, wantB := "tok", "tok"
			if i < held {
				wantA, wantB = "", "other"
			} else if held == 3 {
				wantA, wantB = "", "" // rolled back
			}
			if a, b := c.value(i, "a"), c.value(i, "b"); a != wantA || b != wantB {
				t.Fatalf("held on %d: node %d holds a=%q b=%q, want %q %q", held, i, a, b, wantA, wantB)
			}
		}
	}
}

func TestAcquireKeysFailingSubsets(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	for _, m := range []mode{modeFail, modeLostReply} {
		for mask := range 1 << 5 {
			keys := []string{fmt.Sprintf("a-%d-%d", m, mask), fmt.Sprintf("b-%d-%d", m, mask)}
			c.setMask(mask, m)
			_, err := c.r.AcquireKeys(ctx, keys, "tok", ttl, IfAbsentOrMine)
			c.wait(t)
			if bits.OnesCount(uint(mask)) <= 2 {
				if err != nil {
					t.Fatalf("mode %d mask %05b: %v", m, mask, err)
				}
				continue
			}
			mustKind(t, err, ErrNoQuorum)
			for _, k := range keys {
				if n := c.holders(k, "tok"); n != 0 {
					t.Fatalf("mode %d mask %05b: %d nodes hold %s after rollback", m, mask, n, k)
				}
			}
		}
	}
}

func TestAcquireKeysIfAbsentOrMine(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	keys := []string{"a", "b"}
	if _, err := c.r.AcquireKeys(ctx, keys[:1], "tok", 10*time.Second, IfAbsent); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	for _, mr := range c.mrs {
		mr.FastForward(4 * time.Second)
	}
	// a is ours, b absent: granted, both reset to the new ttl.
	lock, err := c.r.AcquireKeys(ctx, keys, "tok", 20*time.Second, IfAbsentOrMine)
	if err != nil || lock.Validity <= 10*time.Second {
		t.Fatalf("%+v, %v", lock, err)
	}
	c.wait(t)
	for i, mr := range c.mrs {
		if mr.TTL("a") != 20*time.Second || c.value(i, "b") != "tok" {
			t.Fatalf("node %d: a ttl %v, b %q", i, mr.TTL("a"), c.value(i, "b"))
		}
	}
	_, err = c.r.AcquireKeys(ctx, keys, "tok", ttl, IfAbsent)
	mustKind(t, err, ErrHeld)
	_, err = c.r.AcquireKeys(ctx, keys, "other", ttl, IfAbsentOrMine)
	mustKind(t, err, ErrHeld)
	c.wait(t)
	if c.holders("a", "tok") != 5 || c.holders("b", "tok") != 5 {
		t.Fatal("a refused acquire changed the keys")
	}
}

func TestExtendKeys(t *testing.T) {
	ctx := context.Background()
	keys := []string{"a", "b"}
	t.Run("replace", func(t *testing.T) {
		c := newCluster(t, 5, Options{})
		if _, err := c.r.AcquireKeys(ctx, keys, "tok", ttl/2, IfAbsent); err != nil {
			t.Fatal(err)
		}
		c.wait(t)
		v, err := c.r.ExtendKeys(ctx, keys, "tok", ttl, Replace)
		if err != nil || v <= ttl/2 || v > ttl {
			t.Fatalf("validity %v, %v", v, err)
		}
		c.wait(t)
		for i, mr := range c.mrs {
			if mr.TTL("a") != ttl || mr.TTL("b") != ttl {
				t.Fatalf("node %d: ttls %v %v", i, mr.TTL("a"), mr.TTL("b"))
			}
		}
		_, err = c.r.ExtendKeys(ctx, keys, "other", ttl, Replace)
		mustKind(t, err, ErrNotHeld)
		c.setMask(0b11010, modeFail)
		_, err = c.r.ExtendKeys(ctx, keys, "tok", ttl, Replace)
		mustKind(t, err, ErrNoQuorum)
	})
	t.Run("add", func(t *testing.T) {
		// A clock that does not move: the validity is exact, whatever time
		// the calls take on a loaded machine.
		clock := &stepClock{t: time.Unix(1000, 0)}
		c := newCluster(t, 5, Options{Now: clock.Now})
		if _, err := c.r.AcquireKeys(ctx, keys, "tok", 10*time.Second, IfAbsent); err != nil {
			t.Fatal(err)
		}
		c.wait(t)
		for i, mr := range c.mrs {
			mr.FastForward(4 * time.Second)
			if i < 3 {
				mr.SetTTL("b", time.Second) // the smallest, on any quorum
			}
		}
		c.mrs[4].Set("a", "tok") // no expiry: counts as 0 left
		v, err := c.r.ExtendKeys(ctx, keys, "tok", 10*time.Second, Add)
		if err != nil {
			t.Fatal(err)
		}
		// The validity is the least ttl set among the deciding quorum, less
		// the drift (1% of it + 2ms); no time elapsed. Every quorum has one
		// of nodes 0-2, where b gets 1s + 10s; node 4, if it is among the
		// first three to answer, set a to 0 + 10s.
		if v != 11*time.Second-112*time.Millisecond && v != 10*time.Second-102*time.Millisecond {
			t.Fatalf("validity %v, want %v (least 11s) or %v (least 10s, node 4 in the quorum)", v,
				11*time.Second-112*time.Millisecond, 10*time.Second-102*time.Millisecond)
		}
		c.wait(t)
		for i, mr := range c.mrs {
			wantA, wantB := 16*time.Second, 16*time.Second
			if i < 3 {
				wantB = 11 * time.Second
			}
			if i == 4 {
				wantA = 10 * time.Second
			}
			if mr.TTL("a") != wantA || mr.TTL("b") != wantB {
				t.Fatalf("node %d: ttls %v %v, want %v %v", i, mr.TTL("a"), mr.TTL("b"), wantA, wantB)
			}
		}
	})
	t.Run("quorum", func(t *testing.T) {
		for _, partial := range []int{2, 3} {
			c := newCluster(t, 5, Options{})
			if _, err := c.r.AcquireKeys(ctx, keys, "tok", 10*time.Second, IfAbsent); err != nil {
				t.Fatal(err)
			}
			c.wait(t)
			for i := range partial {
				c.mrs[i].Set("b", "other")
				c.mrs[i].SetTTL("b", 10*time.Second)
			}
			_, err := c.r.ExtendKeys(ctx, keys, "tok", ttl, Replace)
			if partial == 2 && err != nil {
				t.Fatal(err)
			}
			if partial == 3 {
				mustKind(t, err, ErrNotHeld)
			}
			c.wait(t)
			for i, mr := range c.mrs {
				want := ttl
				if i < partial {
					want = 10 * time.Second // all or nothing
				}
				if mr.TTL("a") != want {
					t.Fatalf("partial %d: node %d: ttl %v, want %v", partial, i, mr.TTL("a"), want)
				}
			}
		}
	})
	t.Run("used up", func(t *testing.T) {
		clock := &stepClock{t: time.Unix(1000, 0)}
		c := newCluster(t, 3, Options{Now: clock.Now})
		if _, err := c.r.AcquireKeys(ctx, keys, "tok", ttl, IfAbsent); err != nil {
			t.Fatal(err)
		}
		clock.mu.Lock()
		clock.step = 2 * ttl // Add: 100s left + 100s
		clock.mu.Unlock()
		_, err := c.r.ExtendKeys(ctx, keys, "tok", ttl, Add)
		mustKind(t, err, ErrNotHeld)
	})
}

func TestReleaseKeys(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	set := func(key string, values ...string) {
		for i, v := range values {
			if v != "" {
				c.mrs[i].Set(key, v)
			}
		}
	}
	set("a", "tok", "tok", "tok", "tok", "tok")
	set("c", "x", "x", "x", "tok", "tok")
	set("d", "tok", "tok")
	set("e", "x", "x")
	set("f", "tok", "tok", "tok", "x", "x")
	keys := []string{"a", "b", "c", "d", "e", "f", "a"}
	states, err := c.r.ReleaseKeys(ctx, keys, "tok")
	if err != nil {
		t.Fatal(err)
	}
	want := []KeyState{Released, Absent, Other, Absent, Absent, Released, Released}
	if !slices.Equal(states, want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	c.wait(t)
	for _, k := range keys {
		if n := c.holders(k, "tok"); n != 0 {
			t.Fatalf("%d nodes still hold %s", n, k)
		}
	}
	if c.holders("c", "x") != 3 || c.holders("e", "x") != 2 || c.holders("f", "x") != 2 {
		t.Fatal("release touched another owner's keys")
	}

	c.setMask(0b00111, modeFail)
	_, err = c.r.ReleaseKeys(ctx, keys, "tok")
	qe := mustKind(t, err, ErrNoQuorum)
	if qe.Answered != 2 || len(qe.Errs) != 3 {
		t.Fatalf("%+v", qe)
	}
}

// Every key released on a quorum decides while two nodes still hang.
func TestReleaseKeysEarly(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	keys := []string{"a", "b"}
	if _, err := c.r.AcquireKeys(ctx, keys, "tok", ttl, IfAbsent); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	gate := make(chan struct{})
	c.setMaskGated(0b10010, modeHang, gate)
	states, err := c.r.ReleaseKeys(ctx, keys, "tok")
	close(gate)
	if err != nil || !slices.Equal(states, []KeyState{Released, Released}) {
		t.Fatalf("%v, %v", states, err)
	}
}
