package lease

import (
	"context"
	"testing"
	"time"
)

// TestUnkeepWaitsForTheRenewalInFlight: the end of a keep (an expiry, a
// release) waits for a renewal of the key in flight, so that the write
// after it lands after the renewal on every backend and the renewal's
// lease does not replace the expiry the client gave.
func TestUnkeepWaitsForTheRenewalInFlight(t *testing.T) {
	m, _ := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	if err := m.SetIfAbsent(ctx, "k", "v", 0); err != nil {
		t.Fatal(err)
	}
	m.reg.mu.Lock()
	e := m.reg.keys["k"].kept
	if e == nil {
		m.reg.mu.Unlock()
		t.Fatal("a lock without expiry is not kept")
	}
	e.due = time.Now().Add(time.Hour) // no renewal of the loop's own
	e.startRenewal()                  // as if one were in flight
	m.reg.mu.Unlock()

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
	m.reg.mu.Lock()
	e.busy = false
	close(e.renewed)
	m.reg.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("unkeep still waiting after the renewal returned")
	}
}
