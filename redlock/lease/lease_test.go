package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// ttl is the lock ttl of these tests: seconds, so that its 5% (the node
// deadline) is never missed on a loaded machine.
const ttl = 10 * time.Second

// newManager is a Manager over three miniredis backends.
func newManager(t *testing.T, opts Options) (*Manager, []*miniredis.Miniredis) {
	t.Helper()
	rl, mrs := redlocktest.New(t, 3, redlock.Options{})
	opts.Locker, opts.Logger = rl, redlocktest.Logger(t)
	m := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m, mrs
}

// holders counts the backends where key exists.
func holders(mrs []*miniredis.Miniredis, key string) int {
	n := 0
	for _, mr := range mrs {
		if mr.Exists(key) {
			n++
		}
	}
	return n
}

func lockReq(key string) LockRequest {
	return LockRequest{Keys: []string{key}, Token: "tok-" + key, TTL: ttl}
}

func TestAcquireReleaseCounted(t *testing.T) {
	m, _ := newManager(t, Options{})
	ctx := context.Background()
	a := NewOwner(1, OwnerHooks{})
	g, err := m.Acquire(ctx, a, lockReq("k"))
	if err != nil || g.Token != "tok-k" || g.Validity <= 0 || g.Validity > ttl {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if err := m.SetIfAbsent(ctx, "k", "other", ttl); !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("second Acquire: %v, want ErrHeld", err)
	}
	if err := m.Release(ctx, "k", "other"); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("Release by another token: %v", err)
	}
	if err := m.Release(ctx, "k", g.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	want := Stats{Acquired: 1, Contended: 1, Released: 1, NotHeld: 1, HeldFast: 1}
	if s := m.Stats(); s != want {
		t.Fatalf("Stats = %+v, want %+v", s, want)
	}
}

func TestWaitHandOff(t *testing.T) {
	m, _ := newManager(t, Options{})
	ctx := context.Background()
	holder, waiter := NewOwner(1, OwnerHooks{}), NewOwner(2, OwnerHooks{})
	g, err := m.Acquire(ctx, holder, lockReq("k"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		req := lockReq("k")
		req.Token, req.Wait = "waiter", 20*time.Second
		_, err := m.Acquire(ctx, waiter, req)
		got <- err
	}()
	testkit.Eventually(t, 5*time.Second, "the waiter queues", func() bool { return m.Waiters() == 1 })
	if err := m.Release(ctx, "k", g.Token); err != nil {
		t.Fatal(err)
	}
	// The waiter gets the key after the release. Its re-check each second
	// would also get it, so this does not show the wake itself: the
	// registry's TestQueueFIFO does (a release signals the head), and
	// redlock-bench -handoff measures the hand-off time.
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(ttl / 2):
		t.Fatal("the waiter was not handed the lock")
	}
	if info, ok, err := m.Info(ctx, "k", waiter); err != nil || !ok || !info.Mine || info.Waiters != 0 {
		t.Fatalf("Info after hand-off = %+v %v %v", info, ok, err)
	}
}

func TestWaitQueueRules(t *testing.T) {
	m, _ := newManager(t, Options{})
	ctx := context.Background()
	holder := NewOwner(1, OwnerHooks{})
	if _, err := m.Acquire(ctx, holder, lockReq("k")); err != nil {
		t.Fatal(err)
	}
	// A wait that runs out reports ErrWaitOver, which is ErrHeld.
	req := lockReq("k")
	req.Token, req.Wait = "w", 50*time.Millisecond
	if _, err := m.Acquire(ctx, NewOwner(2, OwnerHooks{}), req); !errors.Is(err, ErrWaitOver) || !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("short WAIT: %v", err)
	}
	// A waiter whose owner closes leaves the queue with ErrOwnerGone.
	w := NewOwner(3, OwnerHooks{})
	got := make(chan error, 1)
	go func() {
		req.Wait = 20 * time.Second
		_, err := m.Acquire(ctx, w, req)
		got <- err
	}()
	testkit.Eventually(t, 5*time.Second, "the waiter queues", func() bool { return m.Waiters() == 1 })
	// While it waits, a request without WAIT does not jump the queue.
	if err := m.SetIfAbsent(ctx, "k", "jump", ttl); !errors.Is(err, ErrQueued) {
		t.Fatalf("Acquire past a queue: %v, want ErrQueued", err)
	}
	m.CloseOwner(w)
	if err := <-got; !errors.Is(err, ErrOwnerGone) {
		t.Fatalf("closed waiter: %v", err)
	}
	if n := m.Waiters(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}

func TestGrantToClosedOwnerIsGivenBack(t *testing.T) {
	m, mrs := newManager(t, Options{})
	o := NewOwner(1, OwnerHooks{})
	o.Close()
	if _, err := m.Acquire(context.Background(), o, lockReq("k")); !errors.Is(err, ErrOwnerGone) {
		t.Fatalf("Acquire for a closed owner: %v", err)
	}
	testkit.Eventually(t, 5*time.Second, "the grant is given back and forgotten", func() bool {
		return holders(mrs, "k") == 0 && len(m.Snapshot()) == 0
	})
}

// sessionTTL gives a renewal every second; the node deadline (5%) is
// 150ms.
const sessionTTL = 3 * time.Second

func sessionReq(key string) LockRequest {
	return LockRequest{Keys: []string{key}, Token: "tok-" + key, TTL: sessionTTL, Session: true}
}

func TestSessionRenewedThenReleasedOnClose(t *testing.T) {
	m, mrs := newManager(t, Options{MaxHold: time.Hour})
	o := NewOwner(7, OwnerHooks{Name: func() string { return "app" }})
	if _, err := m.Acquire(context.Background(), o, sessionReq("s")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "two renewals", func() bool { return m.Stats().Extended >= 2 })
	held := m.Snapshot()
	if len(held) != 1 || !held[0].Session || held[0].OwnerID != 7 || held[0].OwnerName != "app" || held[0].Keys[0] != "s" {
		t.Fatalf("Snapshot = %+v", held)
	}
	if m.Sessions() != 1 {
		t.Fatalf("Sessions = %d", m.Sessions())
	}
	m.CloseOwner(o)
	testkit.Eventually(t, 5*time.Second, "the session lock is released", func() bool {
		return holders(mrs, "s") == 0 && m.Sessions() == 0
	})
}

func TestSessionLostWhenStolen(t *testing.T) {
	m, mrs := newManager(t, Options{MaxHold: time.Hour})
	lost := make(chan string, 1)
	o := NewOwner(1, OwnerHooks{Lost: func(key, why string) { lost <- key + ": " + why }})
	if _, err := m.Acquire(context.Background(), o, sessionReq("l")); err != nil {
		t.Fatal(err)
	}
	for _, mr := range mrs {
		mr.Del("l") // behind the proxy's back: the next renewal finds it gone
	}
	select {
	case got := <-lost:
		if got != "l: renewal found it no longer held" {
			t.Fatalf("lost = %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal did not notice the loss")
	}
	testkit.Eventually(t, 5*time.Second, "the lost lock is forgotten", func() bool { return m.Sessions() == 0 })
}

// A SESSION lock released by any release (here a script's ReleaseKeys)
// stops renewing at once: its owner is never told it was lost.
func TestReleaseEndsSession(t *testing.T) {
	m, _ := newManager(t, Options{MaxHold: time.Hour})
	o := NewOwner(1, OwnerHooks{Lost: func(key, why string) { t.Errorf("lost %s after its release: %s", key, why) }})
	g, err := m.Acquire(context.Background(), o, sessionReq("s"))
	if err != nil {
		t.Fatal(err)
	}
	states, err := m.ReleaseKeys(context.Background(), []string{"s"}, g.Token)
	if err != nil || states[0] != redlock.Released {
		t.Fatalf("ReleaseKeys = %v, %v", states, err)
	}
	if n := m.Sessions(); n != 0 {
		t.Fatalf("%d sessions after the release", n)
	}
	// The renewal goroutine has ended: Shutdown finds nothing to wait for.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSessionStopsAtMaxHold(t *testing.T) {
	m, _ := newManager(t, Options{MaxHold: time.Second})
	lost := make(chan string, 1)
	o := NewOwner(1, OwnerHooks{Lost: func(key, why string) { lost <- why }})
	if _, err := m.Acquire(context.Background(), o, sessionReq("h")); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-lost:
		if why != "max_hold reached" {
			t.Fatalf("lost: %q", why)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the lock outlived max_hold and its ttl")
	}
}

func TestShutdownReleasesSessions(t *testing.T) {
	m, mrs := newManager(t, Options{MaxHold: time.Hour})
	if _, err := m.Acquire(context.Background(), NewOwner(1, OwnerHooks{}), sessionReq("s")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Released on a quorum before Shutdown returned; the last backend's
	// delete may land a moment later.
	if n := holders(mrs, "s"); n > 1 {
		t.Fatalf("session lock still on %d backends after Shutdown", n)
	}
	testkit.Eventually(t, 5*time.Second, "released everywhere", func() bool { return holders(mrs, "s") == 0 })
	// A waiter after Shutdown does not wait.
	req := lockReq("x")
	req.Wait = time.Minute
	if _, err := m.Acquire(context.Background(), NewOwner(2, OwnerHooks{}), req); !errors.Is(err, ErrStopped) {
		t.Fatalf("WAIT after Shutdown: %v", err)
	}
}

func TestInfoAndSnapshot(t *testing.T) {
	m, _ := newManager(t, Options{})
	ctx := context.Background()
	a, b := NewOwner(1, OwnerHooks{}), NewOwner(2, OwnerHooks{})
	req := lockReq("f")
	req.Fence = true
	g, err := m.Acquire(ctx, a, req)
	if err != nil || g.Fence <= 0 {
		t.Fatalf("fenced Acquire = %+v, %v", g, err)
	}
	info, ok, err := m.Info(ctx, "f", a)
	if err != nil || !ok || !info.Mine || !info.Fenced || info.Fence != g.Fence || info.NodesHolding != 3 || info.Nodes != 3 ||
		info.Validity <= 0 || info.Validity > ttl || info.TTL <= 0 {
		t.Fatalf("Info = %+v %v %v", info, ok, err)
	}
	if info, _, _ := m.Info(ctx, "f", b); info.Mine {
		t.Fatal("Info says another owner's lock is mine")
	}
	if _, ok, err := m.Info(ctx, "free", a); ok || err != nil {
		t.Fatalf("Info of a free key: %v %v", ok, err)
	}
	if _, err := m.Extend(ctx, []string{"f"}, g.Token, 2*ttl, redlock.Replace); err != nil {
		t.Fatal(err)
	}
	if held := m.Snapshot(); len(held) != 1 || held[0].Validity <= ttl {
		t.Fatalf("Snapshot after Extend = %+v", held)
	}
}

// keepTTL is the lease of writes without expiry in these tests: renewed
// from a second in.
const keepTTL = 3 * time.Second

func TestKeepRenewsUntilOverwritten(t *testing.T) {
	m, mrs := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	if err := m.SetIfAbsent(ctx, "k", "v", 0); err != nil {
		t.Fatal(err)
	}
	if !m.Kept("k", "v") || m.Kept("k", "other") {
		t.Fatal("a lock without expiry is not kept")
	}
	// The acquisition answered at the quorum; the last backends follow.
	if err := m.locker.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, mr := range mrs {
		if ttl := mr.TTL("k"); ttl != keepTTL {
			t.Fatalf("written with ttl %v, want the lease %v", ttl, keepTTL)
		}
		mr.SetTTL("k", time.Second) // as time passing would leave it
	}
	testkit.Eventually(t, 10*time.Second, "the lease is renewed", func() bool {
		for _, mr := range mrs {
			if mr.TTL("k") != keepTTL {
				return false
			}
		}
		return true
	})
	for _, mr := range mrs {
		mr.Set("k", "stolen") // overwritten behind the proxy's back
	}
	testkit.Eventually(t, 10*time.Second, "the overwritten key is no longer kept", func() bool { return !m.Kept("k", "v") })
}

func TestKeepEndsWithReleaseOrExpiry(t *testing.T) {
	m, _ := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		if err := m.SetIfAbsent(ctx, k, "v", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Release(ctx, "a", "v"); err != nil || m.Kept("a", "v") {
		t.Fatalf("after Release: err %v, kept %v", err, m.Kept("a", "v"))
	}
	if _, err := m.Extend(ctx, []string{"b"}, "v", ttl, redlock.Replace); err != nil || m.Kept("b", "v") {
		t.Fatalf("after an Extend with a ttl: err %v, kept %v", err, m.Kept("b", "v"))
	}
}

// fakeWatch records what the Manager subscribes to.
type fakeWatch struct {
	mu      sync.Mutex
	keys    []string
	notices map[string]func(string)
	stops   int
}

func (f *fakeWatch) watch(_ context.Context, key string, notice func(string), _ func()) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
	if f.notices == nil {
		f.notices = make(map[string]func(string))
	}
	f.notices[key] = notice
	return func() {
		f.mu.Lock()
		f.stops++
		f.mu.Unlock()
	}
}

func (f *fakeWatch) state() (keys []string, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...), f.stops
}

// TestWaitWatchesReleasesElsewhere: waiters for a key held elsewhere
// subscribe to its release notices once, a notice reaches the queue, and
// the subscription ends with the last waiter. (The head's back-off would
// also find the key free: that the notice signals the head is shown by the
// registry's TestReleasedElsewhere.)
func TestWaitWatchesReleasesElsewhere(t *testing.T) {
	f := &fakeWatch{}
	m, _ := newManager(t, Options{WatchReleases: f.watch})
	ctx := context.Background()
	if _, err := m.locker.Acquire(ctx, "k", "foreign", ttl); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 2)
	for i := range 2 {
		go func() {
			req := lockReq("k")
			req.Token, req.Wait = fmt.Sprint("waiter-", i), 20*time.Second
			_, err := m.Acquire(ctx, NewOwner(int64(10+i), OwnerHooks{}), req)
			got <- err
		}()
	}
	testkit.Eventually(t, 5*time.Second, "both waiters queued and k watched", func() bool {
		keys, _ := f.state()
		return m.Waiters() == 2 && len(keys) == 1
	})
	if err := m.locker.Release(ctx, "k", "foreign"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	notice := f.notices["k"]
	f.mu.Unlock()
	notice(redlock.TokenTag("foreign"))
	if s := m.Stats(); s.Notices != 1 || s.NoticeWakes != 1 {
		t.Fatalf("Stats = %+v, want one notice that woke a waiter", s)
	}
	if err := <-got; err != nil {
		t.Fatalf("first waiter: %v", err)
	}
	// The second waiter now waits for a lock held here: no new watch; it
	// is handed the key when the first releases.
	if err := m.Release(ctx, "k", "waiter-0"); err != nil {
		if err := m.Release(ctx, "k", "waiter-1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("second waiter: %v", err)
	}
	if keys, stops := f.state(); len(keys) != 1 || stops != 1 {
		t.Fatalf("watched %v, stopped %d times; want k once, stopped once", keys, stops)
	}
}

// TestWaitWatchesReleaseOfLockHeldHere: the waiters for a lock granted
// through this proxy also subscribe to its release notices, so a release
// through another proxy (here: on the backends, then its notice) drops
// the record and hands the key to the head, instead of leaving the head
// asleep until its next check of the record.
func TestWaitWatchesReleaseOfLockHeldHere(t *testing.T) {
	f := &fakeWatch{}
	m, _ := newManager(t, Options{WatchReleases: f.watch})
	ctx := context.Background()
	req := lockReq("k")
	req.TTL = time.Minute
	g, err := m.Acquire(ctx, NewOwner(1, OwnerHooks{}), req)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w := lockReq("k")
		w.Token, w.Wait = "waiter", 50*time.Second
		_, err := m.Acquire(ctx, NewOwner(2, OwnerHooks{}), w)
		got <- err
	}()
	testkit.Eventually(t, 5*time.Second, "the waiter queued and k watched", func() bool {
		keys, _ := f.state()
		return m.Waiters() == 1 && len(keys) == 1
	})
	if err := m.locker.Release(ctx, "k", g.Token); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	notice := f.notices["k"]
	f.mu.Unlock()
	notice(redlock.TokenTag(g.Token))
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if s := m.Stats(); s.NoticeWakes != 1 {
		t.Fatalf("Stats = %+v, want the notice to have woken the waiter", s)
	}
}

func TestHoldRenewsAnyValueUntilDeadline(t *testing.T) {
	m, mrs := newManager(t, Options{KeepTTL: keepTTL})
	for _, mr := range mrs {
		mr.HSet("h", "f", "1")
		mr.SetTTL("h", keepTTL)
	}
	deadline := time.Now().Add(3 * keepTTL)
	m.HoldKey("h", Hold{AnyValue: true, Deadline: deadline})
	if ttl, ok := m.HeldTTL("h", ""); !ok || ttl <= keepTTL || ttl > 3*keepTTL {
		t.Fatalf("HeldTTL = %v, %v; want the time left to the deadline", ttl, ok)
	}
	for _, mr := range mrs {
		mr.SetTTL("h", time.Second) // as time passing would leave it
	}
	testkit.Eventually(t, 10*time.Second, "a hold of any value is renewed", func() bool {
		for _, mr := range mrs {
			if mr.TTL("h") <= time.Second {
				return false
			}
		}
		return true
	})
	testkit.Eventually(t, 30*time.Second, "the hold ends at its deadline", func() bool {
		_, ok := m.HeldTTL("h", "")
		return !ok
	})
	for _, mr := range mrs {
		if ttl := mr.TTL("h"); ttl > time.Until(deadline)+time.Second {
			t.Fatalf("last lease %v outlives the deadline (%v left)", ttl, time.Until(deadline))
		}
	}
}
