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
