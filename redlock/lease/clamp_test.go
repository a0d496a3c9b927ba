package lease

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestVoteClampsAndHolds: a script by vote that writes runs clamped: a key
// it leaves without expiry, or beyond MaxTTL, carries the lease on every
// backend and is held (without deadline, or to the ttl the script set);
// a script that leaves the expiry alone keeps the hold; one that bounds
// the key ends it. A ttl beyond MaxTTL given to a one-key Acquire, or to
// ExpireIf of such a lock, is made with the lease and held to its
// deadline; given to data (Write, ExpireIf of a data key), it is stored
// as it is.
func TestVoteClampsAndHolds(t *testing.T) {
	const maxTTL = 2 * keepTTL
	m, mrs := newManager(t, Options{KeepTTL: keepTTL, MaxTTL: maxTTL})
	ctx := context.Background()
	run := func(src string, writes bool) {
		t.Helper()
		s := script.New(src).ForVote(script.Shape{}, nil)
		if _, err := m.Vote(ctx, s, []string{"k"}, nil, writes); err != nil {
			t.Fatalf("Vote %q: %v", src, err)
		}
	}
	bounded := func(what string) {
		t.Helper()
		// (Every node, once the calls the quorum did not wait for are done.)
		testkit.Eventually(t, 10*time.Second, what+": every copy within max_ttl", func() bool {
			for _, mr := range mrs {
				if ttl := mr.TTL("k"); mr.Exists("k") && (ttl <= 0 || ttl > maxTTL) {
					return false
				}
			}
			return true
		})
	}
	held := func(what string, want time.Duration) {
		t.Helper()
		got, ok := m.HeldTTL("k", "")
		switch {
		case want == 0 && ok:
			t.Fatalf("%s: held (%v), want not", what, got)
		case want == redlock.PTTLNoExpiry && (!ok || got != want):
			t.Fatalf("%s: HeldTTL = %v, %v; want no expiry", what, got, ok)
		case want > 0 && (!ok || got <= want-time.Minute || got > want):
			t.Fatalf("%s: HeldTTL = %v, %v; want about %v", what, got, ok, want)
		}
	}
	run("return redis.call('INCR', KEYS[1])", true)
	bounded("INCR of a new key")
	held("INCR of a new key", redlock.PTTLNoExpiry)
	run("return redis.call('INCR', KEYS[1])", true)
	held("INCR of a held key", redlock.PTTLNoExpiry)
	run("return redis.call('PEXPIRE', KEYS[1], 600000)", true)
	bounded("PEXPIRE 600000")
	held("PEXPIRE 600000", 600*time.Second)
	run("return redis.call('PEXPIRE', KEYS[1], 100)", true)
	held("PEXPIRE 100", 0)

	// Data: a Write of 600 s and an ExpireIf of 700 s carry exactly that.
	exactly := func(what string, want time.Duration) {
		t.Helper()
		// (Every backend, once the write the quorum answered reached it.)
		testkit.Eventually(t, 10*time.Second, what+": every copy's ttl as given", func() bool {
			for _, mr := range mrs {
				if mr.TTL("k") != want {
					return false
				}
			}
			return true
		})
		if _, ok := m.HeldTTL("k", ""); ok {
			t.Fatalf("%s: data is held", what)
		}
	}
	if err := m.Write(ctx, "k", "v", 600*time.Second); err != nil {
		t.Fatal(err)
	}
	exactly("Write of 600 s", 600*time.Second)
	if ok, err := m.ExpireIf(ctx, "k", 700*time.Second, ExpireGT); err != nil || !ok {
		t.Fatalf("ExpireIf GT 700 s = %v, %v", ok, err)
	}
	exactly("ExpireIf of 700 s", 700*time.Second)
	if _, err := m.Delete(ctx, []string{"k"}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetIfAbsent(ctx, "k", "tok", 600*time.Second); err != nil {
		t.Fatalf("Acquire of 600 s: %v", err)
	}
	bounded("Acquire of 600 s")
	if ttl, ok := m.HeldTTL("k", "tok"); !ok || ttl <= 590*time.Second {
		t.Fatalf("Acquire of 600 s: HeldTTL = %v, %v", ttl, ok)
	}
	// A lock's expiry stays a lock's: bounded, and held beyond.
	if ok, err := m.ExpireIf(ctx, "k", 700*time.Second, ExpireGT); err != nil || !ok {
		t.Fatalf("ExpireIf GT 700 s of the lock = %v, %v", ok, err)
	}
	bounded("ExpireIf of 700 s of the lock")
	// A string is held while it holds its value.
	if ttl, ok := m.HeldTTL("k", "tok"); !ok || ttl <= 690*time.Second {
		t.Fatalf("ExpireIf of 700 s: HeldTTL = %v, %v; want about 700s", ttl, ok)
	}
	if _, ok := m.HeldTTL("k", "other"); ok {
		t.Fatal("ExpireIf of 700 s: held for another value")
	}
}
