package redlock

import (
	"context"
	"slices"
	"sync"
)

// keyGate serialises the acquisitions of one key within this process.
// Without it, clients racing for a key through the same proxy can split
// the backends' votes (each backend grants a different client, none
// reaches a quorum, all are told "held" while nobody holds the lock).
// With it, one acquisition per key is in flight from this process at a
// time, and waiters go first come, first served (blocked channel senders
// are queued in order). Several proxies over the same backends can still
// split votes between them; Redlock's answer to that, a retry, is the
// client's WAIT.
type keyGate struct {
	mu sync.Mutex
	m  map[string]*gateEntry
}

type gateEntry struct {
	turn chan struct{} // holds one token while an acquisition is in flight
	refs int           // holders and waiters
}

// enter waits for the turn of every key, in sorted order so that
// multi-key acquisitions cannot deadlock. It returns the function that
// leaves, or ctx's error having left every key it entered.
func (g *keyGate) enter(ctx context.Context, keys []string) (func(), error) {
	if len(keys) > 1 { // enter only reads keys; one key needs no ordering
		keys = slices.Clone(keys)
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	entries := make([]*gateEntry, len(keys))
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[string]*gateEntry)
	}
	for i, k := range keys {
		e := g.m[k]
		if e == nil {
			e = &gateEntry{turn: make(chan struct{}, 1)}
			g.m[k] = e
		}
		e.refs++
		entries[i] = e
	}
	g.mu.Unlock()

	leave := func(entered int) {
		for i := range entered {
			<-entries[i].turn
		}
		g.mu.Lock()
		for i, k := range keys {
			if entries[i].refs--; entries[i].refs == 0 {
				delete(g.m, k)
			}
		}
		g.mu.Unlock()
	}
	for i, e := range entries {
		select {
		case e.turn <- struct{}{}:
		case <-ctx.Done():
			leave(i)
			return nil, ctx.Err()
		}
	}
	return func() { leave(len(entries)) }, nil
}
