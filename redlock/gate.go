package redlock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
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
	mu    sync.Mutex
	m     map[string]*gateEntry
	holds []*prefixHold // votes that may touch keys they build (gateprefix.go)
}

type gateEntry struct {
	turn chan struct{} // holds one token while an acquisition is in flight
	refs int           // holders and waiters
}

// gateEntries recycles entries: one whose refs dropped to zero is no
// longer reachable and its turn is empty.
var gateEntries = sync.Pool{New: func() any { return &gateEntry{turn: make(chan struct{}, 1)} }}

// gatePass is one caller's way through the gate for its keys.
type gatePass struct {
	g       *keyGate
	keys    []string
	entries []*gateEntry
	one     [1]*gateEntry // entries of a single key, without allocating
	entered int           // turns taken
	shares  atomic.Int32  // leaveShared calls still to come (share)
}

// enter waits for the turn of every key, in sorted order so that
// multi-key acquisitions cannot deadlock. It returns the pass to leave
// with, or ctx's error having left every key it entered. The pass keeps
// keys until it leaves, which may be after the caller returned (Release
// leaves once every delete returned): callers must not change them.
func (g *keyGate) enter(ctx context.Context, keys []string) (*gatePass, error) {
	return g.enterAs(ctx, keys, nil)
}

// enterAs is enter for a prefix hold's own keys (self), or for nil.
func (g *keyGate) enterAs(ctx context.Context, keys []string, self *prefixHold) (*gatePass, error) {
	if len(keys) > 1 { // a sorted copy; one key needs no ordering
		keys = slices.Clone(keys)
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	p := &gatePass{g: g, keys: keys}
	p.entries = p.one[:]
	if len(keys) > 1 {
		p.entries = make([]*gateEntry, len(keys))
	}
	g.mu.Lock()
	if err := g.waitHolds(ctx, keys, self); err != nil {
		return nil, err
	}
	if g.m == nil {
		g.m = make(map[string]*gateEntry)
	}
	for i, k := range keys {
		e := g.m[k]
		if e == nil {
			e = gateEntries.Get().(*gateEntry)
			g.m[k] = e
		}
		e.refs++
		p.entries[i] = e
	}
	g.mu.Unlock()

	for _, e := range p.entries {
		// A free turn is taken by a non-blocking send first: the blocking
		// select below also locks ctx's done channel, which every caller
		// of the process shares.
		select {
		case e.turn <- struct{}{}:
			p.entered++
			continue
		default:
		}
		select {
		case e.turn <- struct{}{}:
			p.entered++
		case <-ctx.Done():
			p.leave()
			return nil, ctx.Err()
		}
	}
	return p, nil
}

// leave gives back the turns taken and forgets keys nobody waits for. It
// is called once.
func (p *gatePass) leave() {
	for _, e := range p.entries[:p.entered] {
		<-e.turn
	}
	g := p.g
	g.mu.Lock()
	for i, k := range p.keys {
		e := p.entries[i]
		if e.refs--; e.refs == 0 {
			delete(g.m, k)
			gateEntries.Put(e)
		}
	}
	g.mu.Unlock()
}

// share makes the pass be left by two parties instead of one caller of
// leave: each calls leaveShared once, and the second call leaves. An
// acquisition leaves the gate once it returned and its node calls run by
// goroutines are done (acquireFanout), whichever is last.
func (p *gatePass) share() { p.shares.Store(2) }

// leaveShared is one party's leave of a shared pass.
func (p *gatePass) leaveShared() {
	if p.shares.Add(-1) == 0 {
		p.leave()
	}
}
