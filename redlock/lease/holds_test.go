package lease

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestHoldsHandedOverAndTakenOver: three Managers of one tier over the
// same backends. A's keep is recorded on a quorum before Write returns;
// A hands its holds over and B takes them (a kept value, and a hold of
// any value with a deadline) and renews them; B stops without handing
// over and C, for which B is not live, takes them over from B.
func TestHoldsHandedOverAndTakenOver(t *testing.T) {
	rl, mrs := redlocktest.New(t, 3, redlock.Options{})
	const svc = "tier"
	hk := redlock.HoldsKey(svc)
	live := map[string]bool{"A": true, "B": true, "C": true}
	liveMu := make(chan struct{}, 1) // guards live
	liveIDs := func() []string {
		liveMu <- struct{}{}
		defer func() { <-liveMu }()
		var ids []string
		for id, ok := range live {
			if ok {
				ids = append(ids, id)
			}
		}
		return ids
	}
	start := func(id string) *Manager {
		m := New(Options{Locker: rl, KeepTTL: keepTTL, Logger: redlocktest.Logger(t)})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = m.Shutdown(ctx)
		})
		m.StartHolds(Holds{Service: svc, ID: id, Live: liveIDs})
		return m
	}
	// owners counts the backends whose field of key names owner.
	owners := func(key, owner string) int {
		n := 0
		for _, mr := range mrs {
			if strings.HasPrefix(mr.HGet(hk, key), owner+" ") {
				n++
			}
		}
		return n
	}
	a, b := start("A"), start("B")
	ctx := context.Background()
	if _, err := a.Acquire(ctx, nil, Request{Keys: []string{"k"}, Token: "v", Keep: true}); err != nil {
		t.Fatal(err)
	}
	if n := owners("k", "A"); n < 2 {
		t.Fatalf("the hold is recorded on %d backends when SETNX returns", n)
	}
	for _, mr := range mrs {
		_, _ = mr.Push("list", "x")
		mr.SetTTL("list", keepTTL)
	}
	deadline := time.Now().Add(20 * keepTTL)
	a.HoldKey("list", Hold{AnyValue: true, Deadline: deadline})
	want := "A " + strconv.FormatInt(deadline.UnixMilli(), 10) + " " + redlock.AnyDigest
	if n := owners("list", "A"); n < 2 {
		t.Fatalf("the hold of any value is recorded on %d backends when HoldKey returns", n)
	}
	for _, mr := range mrs {
		if f := mr.HGet(hk, "list"); f != "" && f != want {
			t.Fatalf("the hold of any value is recorded as %q, want %q", f, want)
		}
	}
	if n, err := a.HandOverHolds(ctx); err != nil || n != 2 {
		t.Fatalf("HandOverHolds = %d, %v; want 2", n, err)
	}
	testkit.Eventually(t, 10*time.Second, "B takes both holds over", func() bool {
		_, held := b.HeldTTL("list", "")
		return owners("k", "B") >= 2 && owners("list", "B") >= 2 && b.Kept("k", "v") && held
	})
	if ttl, _ := b.HeldTTL("list", ""); ttl <= keepTTL {
		t.Fatalf("B's HeldTTL of the hold with a deadline = %v, want the time left to it", ttl)
	}
	// B dies (stops renewing, hands nothing over); C claims from B.
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Shutdown(stop); err != nil {
		t.Fatal(err)
	}
	liveMu <- struct{}{}
	live["B"] = false
	<-liveMu
	c := start("C")
	// B is not live, but until it misses a renewal it is not claimed
	// from: C may simply not see it yet. Its leases run below a half, as
	// time would leave them (miniredis ttls do not run).
	time.Sleep(2 * c.claimEvery())
	if c.Kept("k", "v") {
		t.Fatal("C claimed from B while B's lease was whole")
	}
	redlocktest.Elapse(keepTTL*3/5, mrs...)
	testkit.Eventually(t, 10*time.Second, "C takes B's holds over", func() bool {
		_, held := c.HeldTTL("list", "")
		return owners("k", "C") >= 2 && owners("list", "C") >= 2 && c.Kept("k", "v") && held
	})
	// C renews them (miniredis ttls do not run: let time pass).
	redlocktest.Elapse(keepTTL/5, mrs...)
	testkit.Eventually(t, 10*time.Second, "C renews what it took over", func() bool {
		for _, mr := range mrs {
			if mr.TTL("k") <= keepTTL*4/5 || mr.TTL("list") <= keepTTL*4/5 {
				return false
			}
		}
		return true
	})
}

// TestHoldKeepsItsCopyOnMigrateFrom: during a move from one Redis the
// renewal of a hold renews its copy on the old instance too; once that
// copy is gone there, the hold ends and leaves the record.
func TestHoldKeepsItsCopyOnMigrateFrom(t *testing.T) {
	old := miniredis.RunT(t)
	node, err := redlock.DialNodeTLS(old.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rl, mrs := redlocktest.New(t, 3, redlock.Options{MigrateFrom: node})
	m := New(Options{Locker: rl, KeepTTL: keepTTL, Logger: redlocktest.Logger(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	m.StartHolds(Holds{Service: "tier", ID: "A", Live: func() []string { return []string{"A"} }})
	if _, err := m.Acquire(context.Background(), nil, Request{Keys: []string{"k"}, Token: "v", Keep: true}); err != nil {
		t.Fatal(err)
	}
	old.SetTTL("k", time.Second) // as time passing would leave it
	testkit.Eventually(t, 10*time.Second, "the copy on the old instance renewed", func() bool {
		return old.TTL("k") == keepTTL
	})
	old.Del("k")
	testkit.Eventually(t, 10*time.Second, "the hold ended and left the record", func() bool {
		if m.Kept("k", "v") {
			return false
		}
		for _, mr := range mrs {
			if mr.HGet(redlock.HoldsKey("tier"), "k") != "" {
				return false
			}
		}
		return true
	})
}

// TestMaxHolds: past MaxHolds a lock without expiry (or beyond MaxTTL) is
// refused with ErrMaxHolds and counted; a key already held is no new
// hold; a release makes room. Locks with a ttl within MaxTTL are never
// counted.
func TestMaxHolds(t *testing.T) {
	m, _ := newManager(t, Options{KeepTTL: keepTTL, MaxTTL: 2 * keepTTL, MaxHolds: 2})
	ctx := context.Background()
	setnx := func(k, v string) error {
		_, err := m.Acquire(ctx, nil, Request{Keys: []string{k}, Token: v, Keep: true})
		return err
	}
	for _, k := range []string{"h1", "h2"} {
		if err := setnx(k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	if err := setnx("h3", "v"); !errors.Is(err, ErrMaxHolds) {
		t.Fatalf("a third hold = %v, want ErrMaxHolds", err)
	}
	if _, err := m.Acquire(ctx, nil, Request{Keys: []string{"h3"}, Token: "v", TTL: 10 * keepTTL}); !errors.Is(err, ErrMaxHolds) {
		t.Fatalf("a lock beyond max_ttl = %v, want ErrMaxHolds", err)
	}
	if _, err := m.Acquire(ctx, nil, Request{Keys: []string{"short"}, Token: "v", TTL: keepTTL}); err != nil {
		t.Fatalf("a lock within max_ttl = %v", err)
	}
	if err := m.CompareAndSet(ctx, "h1", "v", "w", 0); err != nil {
		t.Fatalf("a held key set again = %v", err)
	}
	if s := m.Stats(); s.HoldsRefused != 2 {
		t.Fatalf("HoldsRefused = %d, want 2", s.HoldsRefused)
	}
	if err := m.Release(ctx, "h2", "v"); err != nil {
		t.Fatal(err)
	}
	if err := setnx("h3", "v"); err != nil {
		t.Fatalf("a hold after a release = %v", err)
	}
}
