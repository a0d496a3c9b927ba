package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// TestVoteWritesWaitForTheOrderLock: a write by vote waits while its
// key's order lock is held through another proxy, runs once it is
// released, and gives its own order lock back; a vote that only reads
// takes none.
func TestVoteWritesWaitForTheOrderLock(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	for _, mr := range c.mrs {
		if err := mr.Set(OrderPrefix+"k", "other-proxy"); err != nil {
			t.Fatal(err)
		}
	}
	write := script.New("return redis.call('HSET', KEYS[1], 'f', ARGV[1])").ForVote(script.Shape{}, nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.r.VoteWrites(ctx, write, []string{"k"}, []string{"v"})
		done <- err
	}()
	if _, err := c.r.Vote(ctx, script.New("return redis.call('HGET', KEYS[1], 'f')"), []string{"j"}, nil); err != nil {
		t.Fatalf("a read by vote: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the write ran while another proxy held its order lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	for _, mr := range c.mrs {
		if mr.Exists("k") {
			t.Fatal("the write reached a backend while another proxy held its order lock")
		}
		mr.Del(OrderPrefix + "k")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the write once the order lock was free: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write did not run within 10 s of its order lock being freed")
	}
	c.wait(t)
	for i, mr := range c.mrs {
		if v := mr.HGet("k", "f"); v != "v" {
			t.Errorf("backend %d: HGET k f = %q, want v", i, v)
		}
		if mr.Exists(OrderPrefix + "k") {
			t.Errorf("backend %d kept the write's order lock", i)
		}
	}
}
