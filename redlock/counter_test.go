package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIncrGrowsOverLaggingNodes: nodes whose copies fell behind do not
// make the counter go back, and the write-back brings them up.
func TestIncrGrowsOverLaggingNodes(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	// Two nodes at 10, three (a quorum) left at 1: a vote would answer
	// the quorum-th largest copy, 2, below the 10 already handed out.
	for i, m := range c.mrs {
		v := "1"
		if i < 2 {
			v = "10"
		}
		if err := m.Set("ctr", v); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.r.Incr(ctx, "ctr", 1)
	if err != nil || got != 11 {
		t.Fatalf("Incr = %d, %v; want 11", got, err)
	}
	c.wait(t)
	for i := range c.mrs {
		if v := c.value(i, "ctr"); v != "11" {
			t.Fatalf("node %d holds %q after the write-back, want 11", i, v)
		}
	}
	if got, err := c.r.Incr(ctx, "ctr", 5); err != nil || got != 16 {
		t.Fatalf("Incr by 5 = %d, %v; want 16", got, err)
	}
}

// TestIncrExactPast2To53: a count is answered exactly however large:
// INCRBY's integer reply passed through a Lua number in the script, and
// 9223372036854775806 + 1 came back as the smallest int64.
func TestIncrExactPast2To53(t *testing.T) {
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		start string
		by    int64
		want  int64
	}{{"9223372036854775806", 1, math.MaxInt64}, {"9007199254740994", 9007199254740993, 18014398509481987}} {
		for _, m := range c.mrs {
			if err := m.Set("big", tc.start); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := c.r.Incr(ctx, "big", tc.by); err != nil || got != tc.want {
			t.Errorf("Incr(%s, %d) = %d, %v; want %d", tc.start, tc.by, got, err, tc.want)
		}
		c.wait(t)
	}
}

// TestIncrKeepsTTL: the write-back keeps the counter's ttl, as INCR does.
func TestIncrKeepsTTL(t *testing.T) {
	c := newCluster(t, 3, Options{})
	for i, m := range c.mrs {
		if err := m.Set("ctr", strconv.Itoa(5-i)); err != nil {
			t.Fatal(err)
		}
		m.SetTTL("ctr", time.Minute)
	}
	if got, err := c.r.Incr(context.Background(), "ctr", 1); err != nil || got != 6 {
		t.Fatalf("Incr = %d, %v; want 6", got, err)
	}
	c.wait(t)
	for i, m := range c.mrs {
		if ttl := m.TTL("ctr"); ttl <= 0 {
			t.Fatalf("node %d: ttl %v after the write-back, want it kept", i, ttl)
		}
	}
}

// TestIncrFailingSubsets: with up to two of five nodes failing each call
// succeeds and answers more than every earlier one; with three it fails
// with ErrNoQuorum.
func TestIncrFailingSubsets(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	var last int64
	for mask := range 1 << 5 {
		c.setMask(mask, modeFail)
		got, err := c.r.Incr(ctx, "ctr", 1)
		c.wait(t)
		if bits.OnesCount(uint(mask)) > 2 {
			mustKind(t, err, ErrNoQuorum)
			continue
		}
		if err != nil {
			t.Fatalf("mask %05b: %v", mask, err)
		}
		if got <= last {
			t.Fatalf("mask %05b: Incr = %d after %d", mask, got, last)
		}
		last = got
	}
}

// TestIncrErrors: a key that holds no integer answers Redis's error, a
// quorum split between errors and integers answers no quorum, and bad
// arguments are refused before any call.
func TestIncrErrors(t *testing.T) {
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	for _, m := range c.mrs {
		if err := m.Set("word", "abc"); err != nil {
			t.Fatal(err)
		}
		m.HSet("hash", "f", "1")
	}
	var re RedisError
	if _, err := c.r.Incr(ctx, "word", 1); !errors.As(err, &re) || string(re) != "ERR value is not an integer or out of range" {
		t.Fatalf("Incr of a word = %v, want Redis's not-an-integer error", err)
	}
	if v := c.value(0, "word"); v != "abc" {
		t.Fatalf("the word became %q", v)
	}
	if _, err := c.r.Incr(ctx, "hash", 1); !errors.As(err, &re) || !strings.HasPrefix(string(re), "WRONGTYPE") {
		t.Fatalf("Incr of a hash = %v, want WRONGTYPE", err)
	}
	for i, m := range c.mrs[:2] {
		if err := m.Set("mixed", fmt.Sprint("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.mrs[2:4] {
		if err := m.Set("mixed", "7"); err != nil {
			t.Fatal(err)
		}
	}
	// Two errors, three integers (8, 8, 1): a quorum of integers.
	if got, err := c.r.Incr(ctx, "mixed", 1); err != nil || got != 8 {
		t.Fatalf("Incr over 2 words and 3 integers = %d, %v; want 8", got, err)
	}
	for _, m := range c.mrs[:3] {
		if err := m.Set("split", "w"); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.r.Incr(ctx, "split", 1); !errors.As(err, &re) {
		t.Fatalf("Incr over 3 words and 2 absent = %d, %v; want the error reply", got, err)
	}
	// Two integers, two words, one hash: no quorum of anything, though
	// every backend answered.
	for i, m := range c.mrs {
		switch i {
		case 0, 1:
			if err := m.Set("three", "w"); err != nil {
				t.Fatal(err)
			}
		case 2:
			m.HSet("three", "f", "1")
		}
	}
	if got, err := c.r.Incr(ctx, "three", 1); !errors.Is(err, ErrDisagree) || err.Error() != "backends disagree: 2 of 5 agree, need 3" {
		t.Fatalf("Incr over 2 words, a hash and 2 absent = %d, %v; want the disagreement", got, err)
	}
	for _, bad := range []struct {
		key string
		by  int64
	}{{FenceKey, 1}, {"", 1}, {"ctr", 0}, {"ctr", -1}} {
		if _, err := c.r.Incr(ctx, bad.key, bad.by); !errors.Is(err, ErrInvalid) {
			t.Errorf("Incr(%q, %d) = %v, want ErrInvalid", bad.key, bad.by, err)
		}
	}
}
