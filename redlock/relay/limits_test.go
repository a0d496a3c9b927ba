package relay

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
)

// TestTrackedKeysBounded: a watcher past MaxWatcherKeys is flushed (one
// invalidation of everything) and keeps only what it tracks next.
func TestTrackedKeysBounded(t *testing.T) {
	r := New(Options{Logger: redlocktest.Logger(t)})
	flushes := 0
	w := r.NewWatcher(func(keys []string) {
		if keys == nil {
			flushes++
		}
	})
	defer w.Close()
	ctx := context.Background()
	batch := make([]string, 1024)
	for i := 0; i < MaxWatcherKeys; i += len(batch) {
		for j := range batch {
			batch[j] = fmt.Sprintf("k:%d", i+j)
		}
		if _, err := w.Track(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if flushes != 0 {
		t.Fatalf("%d flushes up to the bound, want none", flushes)
	}
	if _, err := w.Track(ctx, []string{"one-more"}); err != nil {
		t.Fatal(err)
	}
	r.track.mu.Lock()
	mine, all := len(w.keys), len(r.track.keys)
	r.track.mu.Unlock()
	if flushes != 1 || mine != 1 || all != 1 {
		t.Fatalf("past the bound: %d flushes, %d keys tracked (%d in all), want 1, 1, 1", flushes, mine, all)
	}
	if n := r.Refusals()[LimitWatcherKeys]; n != 1 {
		t.Fatalf("counted %d, want 1", n)
	}
}

// TestBroadcastPrefixesBounded: a watcher may hold MaxWatcherPrefixes,
// all watchers MaxPrefixes; a refused call adds none; a watcher leaving
// takes its prefixes out of the backends' list.
func TestBroadcastPrefixesBounded(t *testing.T) {
	r := New(Options{Logger: redlocktest.Logger(t)})
	ctx := context.Background()
	prefixes := func(w, n int) []string {
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf("w%d:%d:", w, i))
		}
		return ps
	}
	a := r.NewWatcher(func([]string) {})
	defer a.Close()
	if err := a.Broadcast(ctx, prefixes(0, MaxWatcherPrefixes+1)); !errors.Is(err, ErrLimit) {
		t.Fatalf("Broadcast of %d prefixes = %v, want ErrLimit", MaxWatcherPrefixes+1, err)
	}
	if n := r.Prefixes(); n != 0 {
		t.Fatalf("a refused Broadcast registered %d prefixes", n)
	}
	if err := a.Broadcast(ctx, prefixes(0, MaxWatcherPrefixes)); err != nil {
		t.Fatal(err)
	}
	var ws []*Watcher
	for i := 1; r.Prefixes()+MaxWatcherPrefixes <= MaxPrefixes; i++ {
		w := r.NewWatcher(func([]string) {})
		ws = append(ws, w)
		if err := w.Broadcast(ctx, prefixes(i, MaxWatcherPrefixes)); err != nil {
			t.Fatal(err)
		}
	}
	late := r.NewWatcher(func([]string) {})
	defer late.Close()
	var le *LimitError
	if err := late.Broadcast(ctx, prefixes(99, MaxWatcherPrefixes)); !errors.As(err, &le) || le.Limit != LimitPrefixes {
		t.Fatalf("Broadcast past the total = %v, want a LimitError of %s", err, LimitPrefixes)
	}
	for _, w := range ws {
		w.Close()
	}
	if n := r.Prefixes(); n != MaxWatcherPrefixes {
		t.Fatalf("%d prefixes registered after the others left, want the remaining watcher's %d", n, MaxWatcherPrefixes)
	}
	if err := late.Broadcast(ctx, prefixes(99, MaxWatcherPrefixes)); err != nil {
		t.Fatalf("Broadcast once the others left: %v", err)
	}
}

// TestUserSharesBounded: the watchers and subscribers of one user hold
// together at most its share of the tier-wide bounds; past it a call is
// refused and counted, another user and clients of no user are not
// affected, and a client of the user leaving frees its part.
func TestUserSharesBounded(t *testing.T) {
	r := New(Options{Logger: redlocktest.Logger(t)})
	r.maxUserPrefixes, r.maxUserTopics = 40, 50
	ctx := context.Background()
	names := func(tag string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s:%d:", tag, i))
		}
		return out
	}
	limit := func(err error, want string) bool {
		var le *LimitError
		return errors.As(err, &le) && le.Limit == want
	}

	watcher := func(user string) *Watcher {
		w := r.NewWatcher(func([]string) {})
		w.SetUser(user)
		t.Cleanup(w.Close)
		return w
	}
	a, b := watcher("tenant"), watcher("tenant")
	if err := a.Broadcast(ctx, names("a", 32)); err != nil {
		t.Fatal(err)
	}
	if err := b.Broadcast(ctx, names("b", 8)); err != nil {
		t.Fatal(err)
	}
	if err := b.Broadcast(ctx, names("b2", 1)); !limit(err, LimitUserPrefixes) {
		t.Fatalf("a prefix past the user's share = %v, want a LimitError of %s", err, LimitUserPrefixes)
	}
	if err := b.Broadcast(ctx, []string{"a:1:x"}); err != nil { // covered by a's a:1:
		t.Fatalf("a prefix the user's prefixes cover: %v", err)
	}
	if err := watcher("other").Broadcast(ctx, names("o", 32)); err != nil {
		t.Fatalf("another user: %v", err)
	}
	if err := watcher("").Broadcast(ctx, names("n", 32)); err != nil {
		t.Fatalf("a client of no user: %v", err)
	}
	a.Close()
	if err := b.Broadcast(ctx, names("b2", 1)); err != nil {
		t.Fatalf("once the user's other watcher left: %v", err)
	}

	sub := func(user string) *Subscriber {
		s := r.NewSubscriber(func(Message) {})
		s.SetUser(user)
		t.Cleanup(s.Close)
		return s
	}
	s1, s2 := sub("tenant"), sub("tenant")
	if err := s1.Subscribe(ctx, Channel, names("c", 30)...); err != nil {
		t.Fatal(err)
	}
	if err := s2.Subscribe(ctx, Channel, names("d", 20)...); err != nil {
		t.Fatal(err)
	}
	if err := s2.Subscribe(ctx, Channel, "d:one-more"); !limit(err, LimitUserTopics) {
		t.Fatalf("a channel past the user's share = %v, want a LimitError of %s", err, LimitUserTopics)
	}
	if err := s2.Subscribe(ctx, Channel, "c:0:"); err != nil { // the user holds it already
		t.Fatalf("a channel the user holds already: %v", err)
	}
	if err := sub("other").Subscribe(ctx, Channel, names("e", 50)...); err != nil {
		t.Fatalf("another user: %v", err)
	}
	s1.Close()
	if err := s2.Subscribe(ctx, Channel, "d:one-more"); err != nil {
		t.Fatalf("once the user's other subscriber left: %v", err)
	}
	if got := r.Refusals(); got[LimitUserPrefixes] != 1 || got[LimitUserTopics] != 1 {
		t.Fatalf("Refusals = %v, want one of each share", got)
	}
}
