package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// commands counts the commands the backends have served.
func commands(mrs []*miniredis.Miniredis) int {
	n := 0
	for _, mr := range mrs {
		n += mr.CommandCount()
	}
	return n
}

func setNX(key, token string) Request {
	return Request{Keys: []string{key}, Token: token, TTL: ttl}
}

// TestHeldAnsweredFast: contenders for a key granted here are answered
// "held" without a backend command; once per heldRecheck one asks.
func TestHeldAnsweredFast(t *testing.T) {
	c := &clock{t: time.Now()}
	m, mrs := newManager(t, Options{Now: c.now})
	ctx := context.Background()
	if _, err := m.Acquire(ctx, nil, setNX("k", "holder")); err != nil {
		t.Fatal(err)
	}
	before := commands(mrs)
	for range 5 {
		for _, req := range []Request{setNX("k", "other"), setNX("k", "holder"), lockReq("k")} {
			req.Remember = false
			if _, err := m.Acquire(ctx, nil, req); !errors.Is(err, ErrHeldHere) {
				t.Fatalf("Acquire by %s: %v, want ErrHeldHere", req.Token, err)
			}
		}
	}
	if got := commands(mrs) - before; got != 0 {
		t.Fatalf("contended acquisitions sent %d backend commands, want 0", got)
	}
	if s := m.Stats(); s.HeldFast != 15 || s.Contended != 15 {
		t.Fatalf("Stats = %+v, want 15 fast contended answers", s)
	}
	// The holder's own script-style retake (IfAbsentOrMine) asks.
	mine := setNX("k", "holder")
	mine.Mode = redlock.IfAbsentOrMine
	if _, err := m.Acquire(ctx, nil, mine); err != nil {
		t.Fatalf("IfAbsentOrMine by the holder: %v", err)
	}
	// After heldRecheck, one acquisition asks the backends; the next is
	// answered from memory again.
	c.add(heldRecheck)
	before = commands(mrs)
	if _, err := m.Acquire(ctx, nil, setNX("k", "other")); !errors.Is(err, redlock.ErrHeld) || errors.Is(err, ErrHeldHere) {
		t.Fatalf("Acquire after heldRecheck: %v, want a quorum's ErrHeld", err)
	}
	if commands(mrs) == before {
		t.Fatal("the acquisition after heldRecheck sent no backend command")
	}
	if _, err := m.Acquire(ctx, nil, setNX("k", "other")); !errors.Is(err, ErrHeldHere) {
		t.Fatalf("Acquire after the check: %v, want ErrHeldHere", err)
	}
	// Past the grant's validity, nothing is answered from memory.
	c.add(ttl)
	if _, err := m.Acquire(ctx, nil, setNX("k", "other")); errors.Is(err, ErrHeldHere) {
		t.Fatalf("Acquire past the validity: %v, want the backends asked", err)
	}
}

// TestHeldFastEnds: a release through another proxy (its notice), a
// plain SET, a DEL, a release through this proxy each end the fast
// answers for the key at once: the next contender asks the backends.
func TestHeldFastEnds(t *testing.T) {
	c := &clock{t: time.Now()}
	m, mrs := newManager(t, Options{Now: c.now})
	ctx := context.Background()
	grant := func(key string) {
		t.Helper()
		if _, err := m.Acquire(ctx, nil, setNX(key, "holder")); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Acquire(ctx, nil, setNX(key, "other")); !errors.Is(err, ErrHeldHere) {
			t.Fatalf("contender of %s: %v, want ErrHeldHere", key, err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(key string) error
		free   bool // the key is free after the change
	}{
		{"release notice", func(key string) error {
			// Released through another proxy: on the backends, then its notice.
			if err := m.locker.Release(ctx, key, "holder"); err != nil {
				return err
			}
			m.notice(key, redlock.TokenTag("holder"))
			return nil
		}, true},
		{"plain SET", func(key string) error { return m.Write(ctx, key, "v", ttl) }, false},
		{"DEL", func(key string) error { _, err := m.Delete(ctx, []string{key}); return err }, true},
		{"release here", func(key string) error { return m.Release(ctx, key, "holder") }, true},
		{"expire", func(key string) error { _, err := m.Expire(ctx, key, ttl); return err }, false},
		{"flush", func(string) error { return m.FlushAll(ctx) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + tc.name
			grant(key)
			if err := tc.change(key); err != nil {
				t.Fatal(err)
			}
			before := commands(mrs)
			_, err := m.Acquire(ctx, nil, setNX(key, "other"))
			if errors.Is(err, ErrHeldHere) || commands(mrs) == before {
				t.Fatalf("contender after %s: %v without asking the backends", tc.name, err)
			}
			if tc.free != (err == nil) {
				t.Fatalf("contender after %s: %v", tc.name, err)
			}
		})
	}
}

// TestKeepNotAnsweredFast: a write without expiry (SET NX without PX) is
// the register's, linearizable across proxies: it is neither noted nor
// answered from memory.
func TestKeepNotAnsweredFast(t *testing.T) {
	c := &clock{t: time.Now()}
	m, mrs := newManager(t, Options{Now: c.now, KeepTTL: ttl})
	ctx := context.Background()
	keep := setNX("k", "holder")
	keep.Keep = true
	if _, err := m.Acquire(ctx, nil, keep); err != nil {
		t.Fatal(err)
	}
	before := commands(mrs)
	if _, err := m.Acquire(ctx, nil, setNX("k", "other")); !errors.Is(err, redlock.ErrHeld) || errors.Is(err, ErrHeldHere) {
		t.Fatalf("contender of a kept key: %v, want the backends' ErrHeld", err)
	}
	if commands(mrs) == before {
		t.Fatal("the contender of a kept key did not ask the backends")
	}
	if _, err := m.Acquire(ctx, nil, setNX("lock", "holder")); err != nil {
		t.Fatal(err)
	}
	keep = setNX("lock", "other")
	keep.Keep = true
	if _, err := m.Acquire(ctx, nil, keep); errors.Is(err, ErrHeldHere) || !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("a write without expiry on a noted lock: %v, want the backends' ErrHeld", err)
	}
}
