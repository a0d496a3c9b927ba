package lease

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestKeepFollowsTheWinningWrite: two writes of one key without expiry
// overlap; the one the backends kept returns first, the loser last. The
// keep holds the winner's value (it used to hold the last caller's: its
// renewal then found "not held" and the winner expired), and a write
// with an expiry that lost does not end the keep either.
func TestKeepFollowsTheWinningWrite(t *testing.T) {
	m, _ := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	for _, loser := range []time.Duration{0, ttl} {
		m.beginWrite("k")
		m.beginWrite("k")
		// (A node deadline a loaded machine misses fails the write: again.)
		testkit.Eventually(t, 30*time.Second, "the winning write", func() bool {
			return m.locker.Write(ctx, "k", "won", m.leaseTTL(0)) == nil
		})
		m.endWrite(nil, "k", "won", 0)
		m.endWrite(nil, "k", "lost", loser) // its write took effect first
		testkit.Eventually(t, 10*time.Second, "the winner kept", func() bool {
			return m.Kept("k", "won")
		})
		if m.Kept("k", "lost") {
			t.Fatal("the losing value is kept")
		}
		testkit.Eventually(t, 30*time.Second, "a later write with an expiry", func() bool {
			return m.Write(ctx, "k", "next", ttl) == nil
		})
		if m.Kept("k", "won") {
			t.Fatal("kept after a later write with an expiry")
		}
	}
}

// TestUnkeepWaitsForTheRenewalInFlight: the end of a keep (an expiry, a
// release) waits for a renewal of the key in flight, so that the write
// after it lands after the renewal on every backend and the renewal's
// lease does not replace the expiry the client gave.
func TestUnkeepWaitsForTheRenewalInFlight(t *testing.T) {
	m, _ := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	if err := m.Write(ctx, "k", "v", 0); err != nil {
		t.Fatal(err)
	}
	m.keeper.mu.Lock()
	e := m.keeper.keys["k"]
	if e == nil {
		m.keeper.mu.Unlock()
		t.Fatal("a write without expiry is not kept")
	}
	e.due = time.Now().Add(time.Hour) // no renewal of the loop's own
	e.startRenewal()                  // as if one were in flight
	m.keeper.mu.Unlock()

	done := make(chan struct{})
	go func() {
		m.unkeep("k")
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("unkeep returned while a renewal of the key was in flight")
	case <-time.After(300 * time.Millisecond): // it waits up to releaseTimeout (2 s)
	}
	m.keeper.mu.Lock()
	e.busy = false
	close(e.renewed)
	m.keeper.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("unkeep still waiting after the renewal returned")
	}
}
