package relay

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// newRelay returns a Relay over n miniredis backends, shut down when the
// test ends.
func newRelay(t *testing.T, n int) (*Relay, []*miniredis.Miniredis, *redlock.Redlock) {
	t.Helper()
	rl, mrs := redlocktest.New(t, n, redlock.Options{})
	var bs []Backend
	for _, node := range rl.Nodes() {
		bs = append(bs, node.(*backend.RedisNode))
	}
	r := New(Options{Backends: bs, Logger: redlocktest.Logger(t), ConfirmWait: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return r, mrs, rl
}

// inbox collects what a subscriber receives.
type inbox struct {
	mu  sync.Mutex
	got []Message
}

func (b *inbox) deliver(m Message) {
	b.mu.Lock()
	b.got = append(b.got, m)
	b.mu.Unlock()
}

func (b *inbox) payloads() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.got {
		out = append(out, m.Payload)
	}
	return out
}

// TestSubscriberExactlyOnce publishes on every backend, as a PUBLISH
// through any proxy or a script on each backend does: each message is
// delivered once, identical ones each time.
func TestSubscriberExactlyOnce(t *testing.T) {
	r, mrs, _ := newRelay(t, 5)
	var a, p inbox
	ctx := context.Background()
	sa := r.NewSubscriber(a.deliver)
	if err := sa.Subscribe(ctx, Channel, "ch"); err != nil {
		t.Fatal(err)
	}
	sp := r.NewSubscriber(p.deliver)
	if err := sp.Subscribe(ctx, Pattern, "c*"); err != nil {
		t.Fatal(err)
	}
	for _, payload := range []string{"one", "same", "same", "two"} {
		for _, mr := range mrs {
			mr.Publish("ch", payload)
		}
	}
	want := []string{"one", "same", "same", "two"}
	testkit.Eventually(t, 10*time.Second, "four messages on each subscriber", func() bool {
		return len(a.payloads()) >= 4 && len(p.payloads()) >= 4
	})
	// Stray copies would arrive right after the first ones: give them a
	// moment to show.
	time.Sleep(100 * time.Millisecond)
	if got := a.payloads(); !reflect.DeepEqual(got, want) {
		t.Errorf("channel subscriber got %q, want %q", got, want)
	}
	if got := p.payloads(); !reflect.DeepEqual(got, want) {
		t.Errorf("pattern subscriber got %q, want %q", got, want)
	}
	if m := p.got[0]; m.Kind != Pattern || m.Pattern != "c*" || m.Channel != "ch" {
		t.Errorf("pattern message = %+v", m)
	}
	if got := r.Names(Channel, ""); !reflect.DeepEqual(got, []string{"ch"}) {
		t.Errorf("Names = %q", got)
	}
	if r.Count(Channel, "ch") != 1 || r.Count(Pattern, "") != 1 {
		t.Errorf("Count = %d, NUMPAT = %d", r.Count(Channel, "ch"), r.Count(Pattern, ""))
	}

	// The last local subscriber leaving unsubscribes the backends.
	sa.Close()
	sp.Unsubscribe(Pattern, "c*")
	testkit.Eventually(t, 10*time.Second, "the backends unsubscribed", func() bool {
		for _, mr := range mrs {
			if len(mr.PubSubChannels("")) > 0 || mr.PubSubNumPat() > 0 {
				return false
			}
		}
		return true
	})
}

// TestSubscriberLocal: DeliverLocal reaches channel and pattern
// subscribers of this relay only, and local channels never reach the
// backends.
func TestSubscriberLocal(t *testing.T) {
	r, mrs, _ := newRelay(t, 3)
	var a, p inbox
	ctx := context.Background()
	if err := r.NewSubscriber(a.deliver).Subscribe(ctx, Channel, "+switch-master", LocalPrefix+"invalidate"); err != nil {
		t.Fatal(err)
	}
	if err := r.NewSubscriber(p.deliver).Subscribe(ctx, Pattern, "*"); err != nil {
		t.Fatal(err)
	}
	if n := r.DeliverLocal("+switch-master", "redlock 127.0.0.1 1 127.0.0.1 2"); n != 2 {
		t.Fatalf("DeliverLocal reached %d subscriptions, want 2", n)
	}
	if got := a.payloads(); len(got) != 1 || !a.got[0].Internal {
		t.Fatalf("channel subscriber got %+v", a.got)
	}
	testkit.Eventually(t, 10*time.Second, "the backends subscribed", func() bool {
		for _, mr := range mrs {
			if len(mr.PubSubChannels("")) != 1 {
				return false
			}
		}
		return true
	})
	for _, mr := range mrs {
		if chs := mr.PubSubChannels(""); !reflect.DeepEqual(chs, []string{"+switch-master"}) {
			t.Errorf("backend channels = %q: the local channel reached it", chs)
		}
	}
}

// TestSubscriberBackendRestart: a backend that goes away and comes back is
// subscribed again, messages keep flowing meanwhile, and the subscriber
// is told (SetResume) once the backend serves it again, not before.
func TestSubscriberBackendRestart(t *testing.T) {
	r, mrs, _ := newRelay(t, 3)
	var a inbox
	var resumed atomic.Int32
	sub := r.NewSubscriber(a.deliver)
	sub.SetResume(func() { resumed.Add(1) })
	if err := sub.Subscribe(context.Background(), Channel, "ch"); err != nil {
		t.Fatal(err)
	}
	if n := resumed.Load(); n != 0 {
		t.Fatalf("resumed %d times at the first connections", n)
	}
	mrs[0].Close()
	for _, mr := range mrs[1:] {
		mr.Publish("ch", "while-down")
	}
	testkit.Eventually(t, 10*time.Second, "the message published while a backend is down", func() bool {
		return len(a.payloads()) == 1
	})
	if err := mrs[0].Restart(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the restarted backend subscribed again", func() bool {
		return len(mrs[0].PubSubChannels("")) == 1
	})
	testkit.Eventually(t, 10*time.Second, "the subscriber told of the resumption", func() bool {
		return resumed.Load() == 1
	})
	mrs[0].Publish("ch", "only-on-the-restarted-one")
	testkit.Eventually(t, 10*time.Second, "the restarted backend's message", func() bool {
		return len(a.payloads()) == 2
	})
	if got := a.payloads(); got[1] != "only-on-the-restarted-one" {
		t.Fatalf("got %q", got)
	}
}

// TestPop: the first element popped is the answer, its copies on the
// other backends are consumed, a different element is pushed back, and a
// timeout answers nothing.
func TestPop(t *testing.T) {
	r, mrs, _ := newRelay(t, 3)
	ctx := context.Background()
	for _, mr := range mrs {
		if _, err := mr.Lpush("signal", "1"); err != nil {
			t.Fatal(err)
		}
	}
	p, ok, err := r.Pop(ctx, PopRequest{Keys: []string{"other", "signal"}, Timeout: 5 * time.Second})
	if err != nil || !ok || p.Key != "signal" || p.Value != "1" {
		t.Fatalf("Pop = %+v, %v, %v; want signal 1", p, ok, err)
	}
	// miniredis has no CLIENT UNBLOCK: the other pops are cut off by
	// closing their connections, so a copy may stay behind (a stale
	// signal), as a copy pushed after its pop was cancelled does with Redis.
	for _, mr := range mrs {
		mr.Del("signal")
	}

	// Nothing there: the pop waits for the timeout, and answers nothing.
	start := time.Now()
	_, ok, err = r.Pop(ctx, PopRequest{Keys: []string{"signal"}, Timeout: 200 * time.Millisecond})
	if err != nil || ok {
		t.Fatalf("Pop on empty lists = %v, %v; want a timeout", ok, err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("Pop returned after %v, before its timeout", waited)
	}

	// A push while the pop waits wakes it at once.
	done := make(chan Popped, 1)
	go func() {
		p, _, _ := r.Pop(ctx, PopRequest{Keys: []string{"signal"}, Timeout: 20 * time.Second})
		done <- p
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := mrs[1].Lpush("signal", "woken"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-done:
		if p.Value != "woken" {
			t.Fatalf("woken with %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a push did not wake the pop")
	}

	// Cancelled: nothing is taken.
	cancel := make(chan struct{})
	close(cancel)
	if _, ok, err := r.Pop(ctx, PopRequest{Keys: []string{"signal"}, Cancel: cancel}); err == nil || ok {
		t.Fatalf("a cancelled Pop = %v, %v", ok, err)
	}
}

// TestPopPushesBack: an element another backend popped that is not a copy
// of the answer is pushed back.
func TestPopPushesBack(t *testing.T) {
	r, mrs, _ := newRelay(t, 3)
	for i, mr := range mrs {
		if _, err := mr.Lpush("q", fmt.Sprint("e", i)); err != nil {
			t.Fatal(err)
		}
	}
	p, ok, err := r.Pop(context.Background(), PopRequest{Keys: []string{"q"}, Timeout: 5 * time.Second})
	if err != nil || !ok {
		t.Fatalf("Pop = %v, %v", ok, err)
	}
	testkit.Eventually(t, 10*time.Second, "the other elements pushed back", func() bool {
		left := 0
		for _, mr := range mrs {
			l, _ := mr.List("q")
			left += len(l)
			for _, v := range l {
				if v == p.Value {
					return false
				}
			}
		}
		return left == 2
	})
}

// TestPopWrongType: a key that a quorum of backends holds as another
// type answers their WRONGTYPE, as BLPOP on one Redis does, not a lack of
// backends.
func TestPopWrongType(t *testing.T) {
	r, mrs, _ := newRelay(t, 3)
	for _, mr := range mrs[:2] {
		if err := mr.Set("str", "v"); err != nil {
			t.Fatal(err)
		}
	}
	_, ok, err := r.Pop(context.Background(), PopRequest{Keys: []string{"str"}, Timeout: 5 * time.Second})
	var se ServerError
	if ok || !errors.As(err, &se) || !strings.HasPrefix(string(se), "WRONGTYPE") {
		t.Fatalf("Pop of a string = %v, %v; want WRONGTYPE", ok, err)
	}
}

// TestTrackWithoutBackendTracking: backends that refuse CLIENT TRACKING
// (miniredis) cover nothing, so Track says the caller must invalidate.
func TestTrackWithoutBackendTracking(t *testing.T) {
	r, _, _ := newRelay(t, 3)
	w := r.NewWatcher(func([]string) {})
	defer w.Close()
	covered, err := w.Track(context.Background(), []string{"k"})
	if err != nil || covered {
		t.Fatalf("Track = %v, %v; want not covered", covered, err)
	}
}

// TestPopEndsAtShutdown: a pop without a timeout gives up with ErrClosed
// when the relay shuts down, and Shutdown does not wait for it.
func TestPopEndsAtShutdown(t *testing.T) {
	r, mrs, _ := newRelay(t, 3)
	conns := make([]int, len(mrs))
	for i, mr := range mrs {
		conns[i] = mr.CurrentConnectionCount()
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := r.Pop(context.Background(), PopRequest{Keys: []string{"never"}})
		errc <- err
	}()
	// The pop's connections are open: its calls are past dialling (a
	// Shutdown before that only fails their dial).
	testkit.Eventually(t, 10*time.Second, "the pop connected to every backend", func() bool {
		for i, mr := range mrs {
			if mr.CurrentConnectionCount() <= conns[i] {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a pop in flight: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Pop after Shutdown = %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("the pop did not end at Shutdown")
	}
}

// TestBroadcastOwnWritesBounded: a BCAST NOLOOP watcher remembers its own
// writes only for keys under its prefixes (no invalidation comes for the
// others), and forgets those whose invalidation never came once they are
// older than ownWindow: a client writing many keys keeps it bounded.
func TestBroadcastOwnWritesBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := New(Options{Logger: redlocktest.Logger(t), Now: func() time.Time { return now }})
	w := r.NewWatcher(func([]string) {})
	defer w.Close()
	r.track.mu.Lock()
	w.bcast, w.prefixes = true, []string{"p:"}
	r.track.mu.Unlock()
	own := func() int {
		r.track.mu.Lock()
		defer r.track.mu.Unlock()
		return len(w.own)
	}
	for i := range 10_000 {
		w.Wrote([]string{fmt.Sprintf("other:%d", i)})
	}
	if n := own(); n != 0 {
		t.Fatalf("%d own writes remembered for keys outside the prefixes", n)
	}
	for round := range 5 {
		for i := range 1000 {
			w.Wrote([]string{fmt.Sprintf("p:%d:%d", round, i)})
		}
		now = now.Add(ownWindow + time.Second)
	}
	if n := own(); n > 2000 {
		t.Fatalf("%d own writes remembered after 5 windows of 1000 writes each", n)
	}
}

// TestPopsBounded: past maxPops blocking pops at once, a pop is refused
// with a *LimitError and counted, and takes no backend connection; once
// a pop ends, its place is free again.
func TestPopsBounded(t *testing.T) {
	r, mrs, _ := newRelay(t, 3)
	r.maxPops = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := make([]int, len(mrs))
	for i, mr := range mrs {
		conns[i] = mr.CurrentConnectionCount()
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := r.Pop(ctx, PopRequest{Keys: []string{"never"}})
			errs <- err
		}()
	}
	testkit.Eventually(t, 10*time.Second, "both pops connected to every backend", func() bool {
		for i, mr := range mrs {
			if mr.CurrentConnectionCount() < conns[i]+2 {
				return false
			}
		}
		return true
	})
	for i, mr := range mrs {
		conns[i] = mr.CurrentConnectionCount()
	}
	_, _, err := r.Pop(context.Background(), PopRequest{Keys: []string{"never"}, Timeout: 10 * time.Second})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitPops || le.Max != 2 || le.Want != 3 {
		t.Fatalf("a third Pop = %v, want a LimitError of %s", err, LimitPops)
	}
	if got := r.Refusals()[LimitPops]; got != 1 {
		t.Fatalf("Refusals()[%s] = %d, want 1", LimitPops, got)
	}
	for i, mr := range mrs {
		if got := mr.CurrentConnectionCount(); got != conns[i] {
			t.Fatalf("backend %d: %d connections after the refusal, want %d", i, got, conns[i])
		}
	}
	cancel()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled pop = %v", err)
		}
	}
	// Their places free once their connections are back.
	testkit.Eventually(t, 10*time.Second, "a pop allowed again", func() bool {
		_, ok, err := r.Pop(context.Background(), PopRequest{Keys: []string{"never"}, Timeout: 10 * time.Millisecond})
		return err == nil && !ok
	})
}
