package lease

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/migrate"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestHoldsRenewedByTheTier: two Managers of one tier over the same
// backends. A's holds (a kept value, and a hold of any value with a
// deadline) are recorded on a quorum, naming no owner, before the write
// returns. A stops (nothing handed over): B leaves them alone while
// more than half their lease is left, and renews those that fall to it
// below a half; a hold that falls to another live member B renews only
// below a third.
func TestHoldsRenewedByTheTier(t *testing.T) {
	rl, mrs := redlocktest.New(t, 3, redlock.Options{})
	const svc = "tier"
	hk := record.Key(svc)
	var live atomic.Pointer[[]string]
	live.Store(&[]string{"A", "B", "Z"}) // Z: a member that renews nothing here
	start := func(id string) *Manager {
		m := New(Options{Locker: rl, KeepTTL: keepTTL, Logger: redlocktest.Logger(t)})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = m.Shutdown(ctx)
		})
		m.StartHolds(Holds{Service: svc, ID: id, Live: func() []string { return *live.Load() }})
		return m
	}
	// recorded counts the backends whose field of key is f.
	recorded := func(key, f string) int {
		n := 0
		for _, mr := range mrs {
			if mr.HGet(hk, key) == f {
				n++
			}
		}
		return n
	}
	// renewed reports whether every backend's copy of key has more than
	// left of its lease.
	renewed := func(key string, left time.Duration) bool {
		for _, mr := range mrs {
			if mr.TTL(key) <= left {
				return false
			}
		}
		return true
	}
	// Keys that fall to B and to Z among the members B sees.
	mine, theirs := "", ""
	for i := 0; mine == "" || theirs == ""; i++ {
		k := "k" + strconv.Itoa(i)
		if fallsTo(k, []string{"B", "A", "B", "Z"}) == "B" {
			mine = cmp.Or(mine, k)
		} else if fallsTo(k, []string{"B", "Z"}) == "Z" {
			theirs = cmp.Or(theirs, k)
		}
	}
	a, b := start("A"), start("B")
	ctx := context.Background()
	for _, k := range []string{mine, theirs} {
		if err := a.SetIfAbsent(ctx, k, "v", 0); err != nil {
			t.Fatal(err)
		}
		if n := recorded(k, "0 "+digestOf("v")); n < 2 {
			t.Fatalf("the hold is recorded on %d backends when SETNX returns", n)
		}
	}
	for _, mr := range mrs {
		_, _ = mr.Push("list", "x")
		mr.SetTTL("list", keepTTL)
	}
	deadline := time.Now().Add(20 * keepTTL)
	a.HoldKey("list", Hold{AnyValue: true, Deadline: deadline})
	if n := recorded("list", strconv.FormatInt(deadline.UnixMilli(), 10)+" "+record.AnyDigest); n < 2 {
		t.Fatalf("the hold of any value is recorded on %d backends when HoldKey returns", n)
	}
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Shutdown(stop); err != nil {
		t.Fatal(err)
	}
	live.Store(&[]string{"B", "Z"})
	// Whole leases are not B's to renew (miniredis ttls do not run: time
	// is made to pass).
	redlocktest.Elapse(keepTTL*2/5, mrs...)
	time.Sleep(2 * b.roundEvery())
	if renewed(mine, keepTTL*3/5) {
		t.Fatal("B renewed a hold with more than half its lease left")
	}
	redlocktest.Elapse(keepTTL/5, mrs...)
	testkit.Eventually(t, 10*time.Second, "B renews the late holds that fall to it", func() bool {
		return renewed(mine, keepTTL/2) && (fallsTo("list", []string{"B", "Z"}) != "B" || renewed("list", keepTTL/2))
	})
	if renewed(theirs, keepTTL/2) {
		t.Fatal("B renewed a hold that falls to Z above a third of its lease")
	}
	redlocktest.Elapse(keepTTL/10, mrs...)
	testkit.Eventually(t, 10*time.Second, "B renews every hold below a third", func() bool {
		return renewed(theirs, keepTTL/2) && renewed("list", keepTTL/2)
	})
	if ttl, err := b.clientTTL(ctx, "list", redlock.Value{Exists: true, Type: "list", PTTL: mrs[0].TTL("list")}); err != nil || ttl <= keepTTL {
		t.Fatalf("the client's ttl of the hold with a deadline through B = %v, %v; want the time left to it", ttl, err)
	}
}

// TestFallsTo: members that see the same ids agree whatever their order;
// a member leaving moves only its own keys.
func TestFallsTo(t *testing.T) {
	ids := []string{"a", "b", "c", "d"}
	moved := 0
	for i := range 1000 {
		k := strconv.Itoa(i)
		got := fallsTo(k, ids)
		if other := fallsTo(k, []string{"d", "c", "b", "a", "a"}); other != got {
			t.Fatalf("key %s falls to %s or %s by the order of ids", k, got, other)
		}
		if after := fallsTo(k, []string{"a", "b", "c"}); got != "d" && after != got {
			t.Fatalf("key %s moved from %s to %s when d left", k, got, after)
		} else if got == "d" {
			moved++
		}
	}
	if moved < 150 || moved > 350 {
		t.Fatalf("%d of 1000 keys fell to one of four members", moved)
	}
	if fallsTo("k", nil) != "" {
		t.Fatal("a key falls to a member of none")
	}
}

// TestHoldKeepsItsCopyOnMigrateFrom: during a move from one Redis the
// renewal of a hold renews its copy on the old instance too; once that
// copy is gone there, the hold ends and leaves the record.
func TestHoldKeepsItsCopyOnMigrateFrom(t *testing.T) {
	old := miniredis.RunT(t)
	node, err := backend.DialNodeTLS(old.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := redlock.Options{NodeTimeout: redlocktest.NodeTimeout, Logger: redlocktest.Logger(t)}
	rl, mrs := redlocktest.New(t, 3, redlock.Options{Mirror: migrate.New(node, opts)})
	m := New(Options{Locker: rl, KeepTTL: keepTTL, Logger: redlocktest.Logger(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	m.StartHolds(Holds{Service: "tier", ID: "A", Live: func() []string { return []string{"A"} }})
	if err := m.SetIfAbsent(context.Background(), "k", "v", 0); err != nil {
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
			if mr.HGet(record.Key("tier"), "k") != "" {
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
		err := m.SetIfAbsent(ctx, k, v, 0)
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
	if err := m.SetIfAbsent(ctx, "h3", "v", 10*keepTTL); !errors.Is(err, ErrMaxHolds) {
		t.Fatalf("a lock beyond max_ttl = %v, want ErrMaxHolds", err)
	}
	if err := m.SetIfAbsent(ctx, "short", "v", keepTTL); err != nil {
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
