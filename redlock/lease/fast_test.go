package lease

import (
	"context"
	"errors"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
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

// TestHeldAnsweredFast: contenders for a key granted here are answered
// "held" without a backend command; once per heldRecheck one asks.
func TestHeldAnsweredFast(t *testing.T) {
	c := &clock{t: time.Now()}
	m, mrs := newManager(t, Options{Now: c.now})
	ctx := context.Background()
	if err := m.SetIfAbsent(ctx, "k", "holder", ttl); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "every backend holds k", func() bool { return holders(mrs, "k") == len(mrs) }) // as below
	before := commands(mrs)
	for range 5 {
		for _, token := range []string{"other", "holder"} {
			if err := m.SetIfAbsent(ctx, "k", token, ttl); !errors.Is(err, ErrHeldHere) {
				t.Fatalf("Acquire by %s: %v, want ErrHeldHere", token, err)
			}
		}
		if err := m.AcquireScript(ctx, []string{"k"}, "tok-k", ttl, redlock.IfAbsent); !errors.Is(err, ErrHeldHere) {
			t.Fatalf("Acquire by tok-k: %v, want ErrHeldHere", err)
		}
	}
	if got := commands(mrs) - before; got != 0 {
		t.Fatalf("contended acquisitions sent %d backend commands, want 0", got)
	}
	if s := m.Stats(); s.HeldFast != 15 || s.Contended != 15 {
		t.Fatalf("Stats = %+v, want 15 fast contended answers", s)
	}
	// The holder's own script-style retake (IfAbsentOrMine) asks.
	if err := m.AcquireScript(ctx, []string{"k"}, "holder", ttl, redlock.IfAbsentOrMine); err != nil {
		t.Fatalf("IfAbsentOrMine by the holder: %v", err)
	}
	// After heldRecheck, one acquisition asks the backends; the next is
	// answered from memory again.
	c.add(heldRecheck)
	before = commands(mrs)
	if err := m.SetIfAbsent(ctx, "k", "other", ttl); !errors.Is(err, redlock.ErrHeld) || errors.Is(err, ErrHeldHere) {
		t.Fatalf("Acquire after heldRecheck: %v, want a quorum's ErrHeld", err)
	}
	if commands(mrs) == before {
		t.Fatal("the acquisition after heldRecheck sent no backend command")
	}
	if err := m.SetIfAbsent(ctx, "k", "other", ttl); !errors.Is(err, ErrHeldHere) {
		t.Fatalf("Acquire after the check: %v, want ErrHeldHere", err)
	}
	// Past the grant's validity, nothing is answered from memory.
	c.add(ttl)
	if err := m.SetIfAbsent(ctx, "k", "other", ttl); errors.Is(err, ErrHeldHere) {
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
		if err := m.SetIfAbsent(ctx, key, "holder", ttl); err != nil {
			t.Fatal(err)
		}
		if err := m.SetIfAbsent(ctx, key, "other", ttl); !errors.Is(err, ErrHeldHere) {
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
			err := m.SetIfAbsent(ctx, key, "other", ttl)
			if errors.Is(err, ErrHeldHere) || commands(mrs) == before {
				t.Fatalf("contender after %s: %v without asking the backends", tc.name, err)
			}
			if tc.free != (err == nil) {
				t.Fatalf("contender after %s: %v", tc.name, err)
			}
		})
	}
}

// TestKeepAnsweredFast: contenders for a lock without expiry (SET NX
// without PX, SETNX) granted here are refused from memory, without a
// backend command, while the grant's first lease is valid and the key is
// still kept here; once per heldRecheck one asks. After the holder's DEL,
// or once the lease has run out unrenewed and the copies expired, the
// next acquisition asks and is granted.
func TestKeepAnsweredFast(t *testing.T) {
	const long = time.Hour // no renewal falls due within the test
	c := &clock{t: time.Now()}
	m, mrs := newManager(t, Options{Now: c.now, KeepTTL: long})
	ctx := context.Background()
	if err := m.SetIfAbsent(ctx, "k", "holder", 0); err != nil {
		t.Fatal(err)
	}
	// The grant answered at a quorum: the last backend's call (and its
	// connection's setup) may land later, and is not the contenders'.
	testkit.Eventually(t, 5*time.Second, "every backend holds k", func() bool { return holders(mrs, "k") == len(mrs) })
	before := commands(mrs)
	for range 5 {
		for _, req := range []struct {
			token string
			ttl   time.Duration // 0: keep
		}{{"other", 0}, {"holder", 0}, {"other", ttl}} {
			if err := m.SetIfAbsent(ctx, "k", req.token, req.ttl); !errors.Is(err, ErrHeldHere) {
				t.Fatalf("Acquire of a kept key by %s (keep %v): %v, want ErrHeldHere", req.token, req.ttl == 0, err)
			}
		}
	}
	if got := commands(mrs) - before; got != 0 {
		t.Fatalf("contended acquisitions of a kept key sent %d backend commands, want 0", got)
	}
	if s := m.Stats(); s.HeldFast != 15 {
		t.Fatalf("Stats = %+v, want 15 fast answers", s)
	}
	// After heldRecheck one contender asks the backends, and is refused
	// by them.
	c.add(heldRecheck)
	before = commands(mrs)
	if err := m.SetIfAbsent(ctx, "k", "other", 0); !errors.Is(err, redlock.ErrHeld) || errors.Is(err, ErrHeldHere) {
		t.Fatalf("Acquire after heldRecheck: %v, want the backends' ErrHeld", err)
	}
	if commands(mrs) == before {
		t.Fatal("the acquisition after heldRecheck sent no backend command")
	}

	// The holder's DEL releases it: the next contender asks, and gets it.
	if n, err := m.Delete(ctx, []string{"k"}); err != nil || n != 1 {
		t.Fatalf("DEL = %d, %v", n, err)
	}
	if err := m.SetIfAbsent(ctx, "k", "next", 0); err != nil {
		t.Fatalf("SETNX after the holder's DEL: %v", err)
	}

	// A keep that ends here (its renewal found the key changed: here, the
	// keeper forgets it as the renewal would) no longer vouches for the
	// key: the contender asks.
	m.reg.mu.Lock()
	m.reg.setKept("k", nil)
	m.reg.mu.Unlock()
	before = commands(mrs)
	if err := m.SetIfAbsent(ctx, "k", "other", 0); errors.Is(err, ErrHeldHere) || commands(mrs) == before {
		t.Fatalf("contender of a key no longer kept here: %v without asking the backends", err)
	}

	// Expiry: a kept lock whose lease ran out unrenewed (the copies
	// expired on the backends): past the grant's validity the contender
	// asks, and gets it.
	if err := m.SetIfAbsent(ctx, "e", "holder", 0); err != nil {
		t.Fatal(err)
	}
	if err := m.SetIfAbsent(ctx, "e", "other", 0); !errors.Is(err, ErrHeldHere) {
		t.Fatalf("contender of e: %v, want ErrHeldHere", err)
	}
	c.add(long + time.Second)
	redlocktest.Elapse(long+time.Second, mrs...)
	if err := m.SetIfAbsent(ctx, "e", "other", 0); err != nil {
		t.Fatalf("SETNX after the lease expired: %v, want it granted", err)
	}
}
