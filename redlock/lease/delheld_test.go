package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// peer is a second Manager (another proxy) over the backends mrs.
func peer(t *testing.T, mrs []*miniredis.Miniredis) *Manager {
	t.Helper()
	nodes := make([]redlock.Node, len(mrs))
	for i, mr := range mrs {
		n, err := backend.DialNodeTLS(mr.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	rl := redlock.New(nodes, redlock.Options{NodeTimeout: redlocktest.NodeTimeout, Logger: redlocktest.Logger(t)})
	m := New(Options{Locker: rl, Logger: redlocktest.Logger(t), KeepTTL: time.Hour})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
		_ = rl.Close(ctx)
		_ = rl.CloseNodes()
	})
	return m
}

// countingManager is newManager whose backend calls (each command or
// script sent to a backend, whatever it runs there) are counted.
func countingManager(t *testing.T, opts Options) (*Manager, []*miniredis.Miniredis, *atomic.Int64) {
	t.Helper()
	calls := new(atomic.Int64)
	rl, mrs := redlocktest.New(t, 3, redlock.Options{
		ObserveCall: func(string, time.Duration, error) { calls.Add(1) },
	})
	opts.Locker, opts.Logger = rl, redlocktest.Logger(t)
	m := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m, mrs, calls
}

// TestDeleteOfAGrantInOneRound: DEL of a lock granted here (SET NX PX,
// and SET NX without expiry, kept) is one call per backend, a release:
// the key is gone everywhere, the release counted.
func TestDeleteOfAGrantInOneRound(t *testing.T) {
	m, mrs, calls := countingManager(t, Options{KeepTTL: time.Hour})
	ctx := context.Background()
	for _, keep := range []bool{false, true} {
		ttl := ttl
		if keep {
			ttl = 0
		}
		if err := m.SetIfAbsent(ctx, "warm", "v", ttl); err != nil { // loads the scripts: NOSCRIPT costs a call
			t.Fatal(err)
		}
		if _, err := m.Delete(ctx, []string{"warm"}); err != nil {
			t.Fatal(err)
		}
		if err := m.SetIfAbsent(ctx, "k", "v", ttl); err != nil {
			t.Fatal(err)
		}
		// Every operation so far made one call per backend (three in the
		// first pass, four more since); the last of each may have been
		// answered after the operation returned.
		ops := int64(len(mrs)) * int64(3+ifInt(keep, 4))
		testkit.Eventually(t, 10*time.Second, "the earlier operations' calls", func() bool { return calls.Load() >= ops })
		released, before := m.Stats().Released, calls.Load()
		if before != ops {
			t.Fatalf("%d backend calls before the DEL, want %d", before, ops)
		}
		if n, err := m.Delete(ctx, []string{"k"}); err != nil || n != 1 {
			t.Fatalf("keep %v: DEL = %d, %v; want 1", keep, n, err)
		}
		// Answered at a quorum: the last call may still be on its way.
		// Two rounds would have made a quorum of calls each by now.
		if got := calls.Load() - before; got > int64(len(mrs)) {
			t.Fatalf("keep %v: DEL of a grant made %d backend calls, want at most %d (one round)", keep, got, len(mrs))
		}
		testkit.Eventually(t, 10*time.Second, "the last backend call", func() bool {
			return calls.Load()-before >= int64(len(mrs))
		})
		if got := calls.Load() - before; got != int64(len(mrs)) {
			t.Fatalf("keep %v: DEL of a grant made %d backend calls, want %d (one round)", keep, got, len(mrs))
		}
		if got := m.Stats().Released - released; got != 1 {
			t.Fatalf("keep %v: %d releases counted, want 1", keep, got)
		}
		testkit.Eventually(t, 10*time.Second, "k gone from every backend", func() bool { return holders(mrs, "k") == 0 })
		if m.keeps("k") {
			t.Fatalf("keep %v: still kept after DEL", keep)
		}
	}
}

// TestDeleteOfAGrantChangedFallsBack: DEL of a lock granted here whose
// key changed since keeps DEL's meaning: it deletes whatever the key
// holds (another value written behind this proxy's back, the same value
// written plainly through another proxy), counts 1 for a key that
// existed and 0 for one already gone, through the plain delete and not
// as a release. The plain write of the same value is the case the
// companion check is for: a compare-and-delete there would leave the
// write's version newer than the delete.
func TestDeleteOfAGrantChangedFallsBack(t *testing.T) {
	m, mrs := newManager(t, Options{KeepTTL: time.Hour})
	other := peer(t, mrs)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		change  func(key string)
		existed bool
	}{
		{"another value", func(key string) {
			for _, mr := range mrs {
				_ = mr.Set(key, "someone else")
			}
		}, true},
		{"gone", func(key string) {
			for _, mr := range mrs {
				mr.Del(key)
			}
		}, false},
		{"same value written plainly elsewhere", func(key string) {
			if err := other.Write(ctx, key, "holder", 0); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		for _, keep := range []bool{false, true} {
			key := tc.name
			if keep {
				key += " kept"
			}
			ttl := ttl
			if keep {
				ttl = 0
			}
			if err := m.SetIfAbsent(ctx, key, "holder", ttl); err != nil {
				t.Fatal(err)
			}
			tc.change(key)
			released := m.Stats().Released
			n, err := m.Delete(ctx, []string{key})
			if err != nil || (n == 1) != tc.existed {
				t.Fatalf("%s: DEL = %d, %v; existed %v", key, n, err, tc.existed)
			}
			if got := m.Stats().Released - released; got != 0 {
				t.Fatalf("%s: the DEL counted %d releases, want the plain delete", key, got)
			}
			// Answered at a quorum; the last backend follows.
			testkit.Eventually(t, 10*time.Second, key+" gone from every backend", func() bool { return holders(mrs, key) == 0 })
			for _, p := range []*Manager{m, other} {
				if v, err := p.Get(ctx, key); err != nil || v.Exists {
					t.Fatalf("%s: GET after DEL = %+v, %v; want absent", key, v, err)
				}
			}
		}
	}
}

func ifInt(b bool, n int) int {
	if b {
		return n
	}
	return 0
}
