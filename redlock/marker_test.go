package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"testing"
	"time"
)

// TestMarkersFollowTheLock: a lock's marker is written with it on every
// backend, follows its extends, PEXPIRE and compare-and-set, marks it
// (Marked) while the key holds the lock's value, and is deleted with it by a release, so
// that released locks leave no key behind; a plain write over a lock
// leaves a marker that no longer matches.
func TestMarkersFollowTheLock(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	marked := func(key string, want bool) {
		t.Helper()
		if got, err := c.r.Marked(ctx, key); err != nil || got != want {
			t.Fatalf("Marked(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
	if _, err := c.r.Acquire(ctx, "k", "tok", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	marked("k", true)
	sum := sha1.Sum([]byte("tok"))
	if got := c.value(0, markKey("k")); got != hex.EncodeToString(sum[:]) {
		t.Errorf("the marker holds %q, want the token's SHA1 (never the value itself)", got)
	}
	if _, err := c.r.Extend(ctx, "k", "tok", 8*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.r.Expire(ctx, "k", 9*time.Second); err != nil {
		t.Fatal(err)
	}
	n := 0 // PEXPIRE answered at a quorum: the last call may be on its way
	for _, mr := range c.mrs {
		if mr.TTL(markKey("k")) == 9*time.Second {
			n++
		}
	}
	if n < 2 {
		t.Errorf("%d markers have the key's 9s after its PEXPIRE answered, want a quorum", n)
	}
	if _, err := c.r.CompareAndSet(ctx, "k", "tok", "tok2", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	marked("k", true) // the marker moved to the new value
	if err := c.r.Release(ctx, "k", "tok2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.r.AcquireKeys(ctx, []string{"a", "b"}, "tok", 2*time.Second, IfAbsent); err != nil {
		t.Fatal(err)
	}
	marked("a", true)
	if _, err := c.r.ReleaseKeys(ctx, []string{"a", "b"}, "tok"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.r.Close(cctx); err != nil {
		t.Fatal(err)
	}
	for i, mr := range c.mrs {
		if keys := mr.Keys(); len(keys) != 0 {
			t.Errorf("node %d keeps %q after every lock was released", i, keys)
		}
	}
	c = newCluster(t, 3, Options{})
	if _, err := c.r.Acquire(ctx, "w", "tok", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.r.Write(ctx, "w", "data", 0); err != nil {
		t.Fatal(err)
	}
	marked("w", false)
	marked("never", false)
}
