package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A node keeps the newest version it was sent, whatever order writes
// arrive in: an older write delayed behind a newer one changes nothing.
func TestVersionedWriteKeepsNewest(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	if _, err := c.r.writeVersion(ctx, "write", "k", true, "new", 0, version{n: 5, id: "b"}); err != nil {
		t.Fatal(err)
	}
	newer, err := c.r.writeVersion(ctx, "write", "k", true, "old", 0, version{n: 4, id: "z"})
	if err != nil || newer == nil || *newer != (version{n: 5, id: "b"}) {
		t.Fatalf("older write: newer %v, %v; want refused for 5/b", newer, err)
	}
	if _, err := c.r.writeVersion(ctx, "write", "k", false, "", 0, version{n: 5, id: "a"}); err != nil {
		t.Fatal(err)
	}
	c.wait(t) // the writes answered at a quorum: let their last copies land
	for i := range c.mrs {
		if v := c.value(i, "k"); v != "new" {
			t.Fatalf("node %d holds %q, want new", i, v)
		}
	}
	// A write reads the newest version and goes above it.
	if err := c.r.Write(ctx, "k", "last", time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := c.r.Get(ctx, "k"); err != nil || v.Data != "last" {
		t.Fatalf("Get = %+v, %v; want last", v, err)
	}
}

// A write that reached two of five nodes (not acknowledged) is the
// newest: a read answers it once it wrote it back to a quorum, so that
// every later read answers it too, even without the two nodes.
func TestReadRepair(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	if err := c.r.Write(ctx, "k", "old", 0); err != nil {
		t.Fatal(err)
	}
	c.setMask(0b11100, modeFail)
	_, err := c.r.writeVersion(ctx, "write", "k", true, "new", 0, version{n: 2, id: "z"})
	mustKind(t, err, ErrNoQuorum)
	c.setMask(0b10000, modeFail) // 2 new, 2 old answer
	if v, err := c.r.Get(ctx, "k"); err != nil || v.Data != "new" {
		t.Fatalf("Get with node 4 failing = %+v, %v; want new (the newest, written back)", v, err)
	}
	c.setMask(0b00011, modeFail) // the two that had new first
	if v, err := c.r.Get(ctx, "k"); err != nil || v.Data != "new" {
		t.Fatalf("Get after the write-back = %+v, %v; want new", v, err)
	}
}

// A backend restarted empty reports version zero: a read does not take
// its "absent", with two others that never saw the write, for a quorum.
func TestReadRestartedEmpty(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	c.setMask(0b11000, modeFail)
	if err := c.r.Write(ctx, "k", "v", 0); err != nil { // on nodes 0-2
		t.Fatal(err)
	}
	c.setMask(0, modeOK)
	c.mrs[2].FlushAll() // restarted empty
	if v, err := c.r.Get(ctx, "k"); err != nil || v.Data != "v" {
		t.Fatalf("Get = %+v, %v; want v (newest, on nodes 0 and 1)", v, err)
	}
}

// A node where a lock command changed the key since its last plain write
// is not guessed at: with no quorum on one value, the read fails.
func TestReadChangedNoGuess(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	if err := c.r.Write(ctx, "k", "x", 0); err != nil {
		t.Fatal(err)
	}
	c.wait(t) // the write answered at a quorum: its last copies land now, not over the sets below
	for i := range 2 {
		if err := c.mrs[i].Set("k", "tok"); err != nil {
			t.Fatal(err)
		}
	}
	c.setMask(0b10000, modeFail)
	if _, err := c.r.Get(ctx, "k"); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("Get = %v; want ErrNoQuorum (2 changed, 2 versioned)", err)
	}
	c.setMask(0, modeOK)
	if v, err := c.r.Get(ctx, "k"); err != nil || v.Data != "x" {
		t.Fatalf("Get = %+v, %v; want x (on three of five)", v, err)
	}
}

func BenchmarkWrite5(b *testing.B) {
	c := newCluster(b, 5, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.r.Write(ctx, "bench", "v", time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteUnversioned5 is the single SET a write was before it was
// versioned, for comparison.
func BenchmarkWriteUnversioned5(b *testing.B) {
	c := newCluster(b, 5, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.r.ack(ctx, "write", c.r.nodeTimeout, []any{"SET", "bench", "v", "PX", 60000}); err != nil {
			b.Fatal(err)
		}
	}
}
