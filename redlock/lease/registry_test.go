package lease

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

func TestQueueFIFO(t *testing.T) {
	var r registry
	ws := make([]*waiter, 3)
	for i := range ws {
		ws[i] = r.enqueue("k")
	}
	signalled := func(w *waiter) bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	if !signalled(ws[0]) || signalled(ws[1]) || signalled(ws[2]) {
		t.Fatal("only the head is signalled on enqueue")
	}
	r.leave("k", ws[1]) // a waiter in the middle leaves: nobody is woken
	if signalled(ws[2]) {
		t.Fatal("leaving from the middle woke the tail")
	}
	r.released("k", "t") // a release wakes the head only
	if !signalled(ws[0]) || signalled(ws[2]) {
		t.Fatal("a release must wake the head only")
	}
	r.leave("k", ws[0])
	if !r.isHead("k", ws[2]) || !signalled(ws[2]) {
		t.Fatal("the next waiter must become the head and be woken")
	}
	r.leave("k", ws[2])
	if r.waiting("k") != 0 || len(r.keys) != 0 {
		t.Fatal("queue not cleaned up")
	}
}

// A release notice forgets the lock remembered under the released token
// and wakes the key's first waiter; a notice for another token only
// wakes it.
func TestReleasedElsewhere(t *testing.T) {
	var r registry
	now := time.Now()
	l := &heldLock{keys: []string{"k"}, token: "mine", expires: now.Add(time.Minute)}
	r.add(l, now)
	w := r.enqueue("k")
	<-w.wake // the head is signalled on enqueue
	if !r.releasedElsewhere("k", redlock.TokenTag("other")) {
		t.Fatal("releasedElsewhere says k has no waiter")
	}
	if r.lookup("k") != l {
		t.Fatal("a notice for another token forgot the lock")
	}
	select {
	case <-w.wake:
	default:
		t.Fatal("a notice did not wake the waiter")
	}
	r.releasedElsewhere("k", redlock.TokenTag("mine"))
	if r.lookup("k") != nil {
		t.Fatal("a notice for the remembered token did not forget it")
	}
	select {
	case <-w.wake:
	default:
		t.Fatal("the release did not wake the waiter")
	}
	r.leave("k", w)
	if r.releasedElsewhere("k", "") {
		t.Fatal("releasedElsewhere says k has a waiter after it left")
	}
}

// TestWatchEntries: one watch per key while it has waiters; the last
// waiter to leave gets its stop, or, while the subscription is still being
// made, the subscriber is told to stop it itself.
func TestWatchEntries(t *testing.T) {
	var r registry
	if r.startWatch("k") != nil {
		t.Fatal("a key without waiters is watched")
	}
	w1, w2 := r.enqueue("k"), r.enqueue("k")
	e := r.startWatch("k")
	if e == nil || r.startWatch("k") != nil {
		t.Fatal("want exactly one watch of k")
	}
	stopped := 0
	if !r.setWatch("k", e, func() { stopped++ }) {
		t.Fatal("setWatch refused a live watch")
	}
	if stop := r.leave("k", w1); stop != nil {
		t.Fatal("a waiter that is not the last one got the stop")
	}
	if stop := r.leave("k", w2); stop == nil {
		t.Fatal("the last waiter did not get the stop")
	} else {
		stop()
	}
	if stopped != 1 {
		t.Fatalf("stopped %d times", stopped)
	}

	// The last waiter leaves while the subscription is being made, and a
	// new one starts another: the first cannot take the second's place.
	w3 := r.enqueue("k")
	old := r.startWatch("k")
	if stop := r.leave("k", w3); stop != nil {
		t.Fatal("a watch still being made has no stop to hand out")
	}
	w4 := r.enqueue("k")
	cur := r.startWatch("k")
	if cur == nil || r.setWatch("k", old, func() {}) {
		t.Fatal("a stale watch was recorded")
	}
	if !r.setWatch("k", cur, func() {}) {
		t.Fatal("the current watch was refused")
	}
	if r.leave("k", w4) == nil {
		t.Fatal("the current watch's stop was lost")
	}
}

// TestKeyStateLeavesWhenAllEnded: a key whose grant, waiters, watch and
// note all ended has no record left in the registry, whichever transition
// ended the last of them.
func TestKeyStateLeavesWhenAllEnded(t *testing.T) {
	var r registry
	now := time.Now()
	empty := func(step string) {
		t.Helper()
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.keys) != 0 {
			t.Fatalf("%s: %d key records left: %v", step, len(r.keys), r.keys)
		}
	}
	grant := func(token string, keys ...string) *heldLock {
		_, gen := r.admit(keys, token, false, now, true)
		r.noteGrant(keys, token, now.Add(time.Minute), gen, now, false)
		l := &heldLock{keys: keys, token: token, expires: now.Add(time.Minute)}
		r.add(l, now)
		return l
	}

	// An MLOCK with a waiter watching, released: the waiter leaves last.
	grant("t", "a", "b")
	w := r.enqueue("a")
	e := r.startWatch("a")
	r.setWatch("a", e, func() {})
	r.released("a", "t")
	if stop := r.leave("a", w); stop == nil {
		t.Fatal("the last waiter did not get the watch's stop")
	}
	empty("MLOCK released, waiter left")

	// A grant replaced by another, then removed; its note forgotten.
	grant("old", "k")
	l := grant("new", "k")
	r.remove(l)
	empty("grant replaced, then removed")

	// A notice of the remembered token; a notice with none remembered.
	grant("t", "k")
	r.releasedElsewhere("k", redlock.TokenTag("t"))
	r.releasedElsewhere("k", "")
	empty("released elsewhere")

	// Notes only: forgotten, dropped as kept, expired, flushed.
	_, gen := r.admit([]string{"n"}, "t", false, now, false)
	r.noteGrant([]string{"n"}, "t", now.Add(time.Minute), gen, now, false)
	r.forget("n")
	r.noteGrant([]string{"n"}, "t", now.Add(time.Minute), r.gen, now, true)
	if r.keptNotesLive([]string{"n"}) {
		t.Fatal("the note of a keep that ended vouches for n")
	}
	r.noteGrant([]string{"n", "m"}, "t", now.Add(time.Millisecond), r.gen, now, false)
	if r.admit([]string{"n"}, "x", false, now.Add(time.Second), true); len(r.tokens("m")) == 0 {
		t.Fatal("the note of m is gone before its deadline was read")
	}
	r.forgetAll()
	empty("notes forgotten, of a keep ended, expired, flushed")

	// A grant that expires by its timer.
	short := &heldLock{keys: []string{"x"}, token: "t", expires: time.Now().Add(time.Millisecond)}
	r.add(short, time.Now())
	testkit.Eventually(t, 5*time.Second, "the grant expires", func() bool { return r.lookup("x") == nil })
	empty("grant expired")

	// A watch whose waiters left while it was being made.
	w = r.enqueue("q")
	e = r.startWatch("q")
	r.leave("q", w)
	if r.setWatch("q", e, func() {}) {
		t.Fatal("a watch without waiters was recorded")
	}
	empty("watch of waiters gone")
}

// TestKeyStateOfTheManagerLeaves: the same through the Manager's
// operations, keeps and the holds record included.
func TestKeyStateOfTheManagerLeaves(t *testing.T) {
	m, _ := newManager(t, Options{KeepTTL: keepTTL})
	ctx := context.Background()
	holder, waiter := NewOwner(1, OwnerHooks{}), NewOwner(2, OwnerHooks{})
	g, err := m.Acquire(ctx, holder, lockReq("l"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx, waiter, LockRequest{Keys: []string{"l"}, Token: "w", TTL: ttl, Wait: 5 * time.Second})
		done <- err
	}()
	testkit.Eventually(t, 5*time.Second, "the waiter queues", func() bool { return m.Waiters() == 1 })
	if err := m.Release(ctx, "l", g.Token); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if err := m.Release(ctx, "l", "w"); err != nil {
		t.Fatal(err)
	}
	if err := m.SetIfAbsent(ctx, "s", "v", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Delete(ctx, []string{"s"}); err != nil || n != 1 {
		t.Fatalf("DEL = %d, %v", n, err)
	}
	m.HoldKey("h", Hold{AnyValue: true})
	if _, err := m.Expire(ctx, "h", ttl); err != nil {
		t.Fatal(err)
	}
	m.reg.setRecorded([]record.Scanned{{Field: record.Field{Key: "r"}}, {Field: record.Field{Key: "s"}}})
	m.reg.setRecorded([]record.Scanned{{Field: record.Field{Key: "r"}}})
	if m.reg.get("r").recorded == nil || m.reg.get("s").recorded != nil {
		t.Fatal("a round's record did not replace the last one's")
	}
	m.reg.setRecorded(nil)
	if _, err := m.Acquire(ctx, holder, sessionReq("x")); err != nil {
		t.Fatal(err)
	}
	m.CloseOwner(holder)
	testkit.Eventually(t, 5*time.Second, "every key record leaves", func() bool {
		m.reg.mu.Lock()
		defer m.reg.mu.Unlock()
		return len(m.reg.keys) == 0 && m.reg.nKept == 0 && m.reg.nRecorded == 0
	})
}

// TestGrantNotedUnlessItsKeyForgotten: a grant is noted unless one of its
// own keys was forgotten (changed through this proxy) while it was being
// acquired; a forget of another key, or one before the acquisition began,
// does not drop it. With one count for every key, each DEL among 16
// clients on distinct keys dropped the notes of the others' acquisitions
// in flight, and their DELs fell back to two rounds.
func TestGrantNotedUnlessItsKeyForgotten(t *testing.T) {
	var r registry
	now := time.Now()
	noted := func(key string, forget ...string) bool {
		_, gen := r.admit([]string{key}, "t", false, now, false)
		r.forget(forget...)
		r.noteGrant([]string{key}, "t", now.Add(time.Minute), gen, now, false)
		ok := len(r.tokens(key)) == 1
		r.forget(key)
		return ok
	}
	var others []string // keys whose slots are not a's (the seed is random)
	for i := 0; len(others) < 2; i++ {
		if k := fmt.Sprint("k", i); slot(k) != slot("a") {
			others = append(others, k)
		}
	}
	if !noted("a", others...) {
		t.Errorf("a grant of a was not noted after forgets of %v", others)
	}
	if noted("a", others[0], "a") {
		t.Error("a grant of a was noted after a forget of a during its acquisition")
	}
	for _, forget := range []func(){r.forgetAll, r.forgetBuilt} {
		_, gen := r.admit([]string{"a"}, "t", false, now, false)
		forget()
		if r.noteGrant([]string{"a"}, "t", now.Add(time.Minute), gen, now, false); len(r.tokens("a")) != 0 {
			t.Error("a grant of a was noted after a flush, or a script that built keys, during its acquisition")
		}
	}
}
