package lease

import (
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
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
	if r.waiting("k") != 0 || len(r.queues) != 0 {
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
	r.releasedElsewhere("k", redlock.TokenTag("other"))
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
	r.wakeAll()
	select {
	case <-w.wake:
	default:
		t.Fatal("wakeAll did not wake the waiter")
	}
	r.leave("k", w)
}
