package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// blocked reports whether enter(keys) is still waiting after a moment: a
// busy machine can only make a wrongly open gate look closed, never the
// reverse.
func blocked(g *keyGate, keys ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p, err := g.enter(ctx, keys)
	if err == nil {
		p.leave()
		return false
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// TestGatePrefixHold: a vote on a script that builds keys from "dk" holds
// every key starting with "dk" or "{dk", and no other.
func TestGatePrefixHold(t *testing.T) {
	ctx := context.Background()
	g := &keyGate{}
	leave, err := g.enterBuilt(ctx, []string{"dk"}, []string{"", "{"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"dk", "dk:x", "{dk}:y"} {
		if !blocked(g, k) {
			t.Errorf("enter(%q) passed a hold on dk and {dk", k)
		}
	}
	if blocked(g, "other", "d") {
		t.Fatal("enter of keys the hold does not cover waited")
	}
	if blocked(g, "a", "dk:x") == false {
		t.Fatal("a multi-key pass with one covered key passed")
	}
	// An overlapping hold waits; a disjoint one does not.
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := g.enterBuilt(wctx, []string{"dk:x"}, []string{""}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an overlapping hold = %v, want it to wait", err)
	}
	cancel()
	other, err := g.enterBuilt(ctx, []string{"ek"}, []string{""})
	if err != nil {
		t.Fatal(err)
	}
	other()
	entered := make(chan error, 1)
	go func() {
		p, err := g.enter(ctx, []string{"dk:x"})
		if err == nil {
			p.leave()
		}
		entered <- err
	}()
	leave()
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
	if blocked(g, "dk:x") || len(g.holds) != 0 || len(g.m) != 0 {
		t.Fatalf("after the hold: holds %d, keys %d", len(g.holds), len(g.m))
	}
}

// TestGatePrefixWaitsForPasses: a hold waits for the passes already on
// keys it covers.
func TestGatePrefixWaitsForPasses(t *testing.T) {
	ctx := context.Background()
	g := &keyGate{}
	p, err := g.enter(ctx, []string{"dk:x"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := g.enterBuilt(wctx, []string{"dk"}, []string{""}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hold over a key in use = %v, want it to wait", err)
	}
	if len(g.holds) != 0 {
		t.Fatal("a hold given up stays registered")
	}
	got := make(chan error, 1)
	go func() {
		leave, err := g.enterBuilt(ctx, []string{"dk"}, []string{""})
		if err == nil {
			leave()
		}
		got <- err
	}()
	p.leave()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestVoteHoldsBuiltKeys: while a vote of a script building keys runs,
// the gate of a key it may build is closed.
func TestVoteHoldsBuiltKeys(t *testing.T) {
	c := newCluster(t, 3, Options{})
	gate := make(chan struct{})
	c.setMaskGated(0b111, modeGated, gate)
	s := script.New("return redis.call('SET', KEYS[1] .. ':x', ARGV[1])").ForVote(script.Shape{}, []string{""})
	done := make(chan error, 1)
	go func() {
		_, err := c.r.Vote(context.Background(), s, []string{"dk"}, []string{"v"})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); !blocked(&c.r.gate, "dk"); { // the vote has entered
		if time.Now().After(deadline) {
			t.Fatal("the vote never entered the gate")
		}
	}
	if !blocked(&c.r.gate, "dk:x") {
		t.Fatal("a built key's gate is open while the vote runs")
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if blocked(&c.r.gate, "dk:x") {
		t.Fatal("a built key's gate stays closed after the vote")
	}
}

// TestVoteBuiltFromEmptyKeyRefused: keys built from an empty key are any
// keys; the vote is refused rather than holding every key of the proxy
// while the script runs.
func TestVoteBuiltFromEmptyKeyRefused(t *testing.T) {
	c := newCluster(t, 3, Options{})
	s := script.New("return redis.call('SET', KEYS[1] .. ':x', ARGV[1])").ForVote(script.Shape{}, []string{""})
	if _, err := c.r.Vote(context.Background(), s, []string{""}, []string{"v"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Vote building from an empty key = %v, want ErrInvalid", err)
	}
}
