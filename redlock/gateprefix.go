package redlock

import (
	"context"
	"slices"
	"strings"
)

// A script run by vote may touch keys it builds from its declared keys
// (KEYS[1] .. ':x'): each starts with a literal (maybe empty) and then a
// declared key. Its vote holds every key with such a start, and not only
// those in use now: a prefix hold. While it is registered, any pass
// entering a key it covers waits for it to end, and it waits for the
// passes already holding or waiting for such keys. Two holds whose starts
// overlap (one a prefix of the other) take turns. Holds are rare; a pass
// that meets none pays one length check.

// prefixHold is one vote's hold on every key starting with one of starts.
type prefixHold struct {
	starts []string
	done   chan struct{} // closed when the hold ends
}

// covers reports whether key starts with one of h's starts.
func (h *prefixHold) covers(key string) bool {
	for _, s := range h.starts {
		if strings.HasPrefix(key, s) {
			return true
		}
	}
	return false
}

// overlaps reports whether some key could start with a start of h and
// with one of o.
func (h *prefixHold) overlaps(o *prefixHold) bool {
	for _, s := range o.starts {
		if h.covers(s) || slices.ContainsFunc(h.starts, func(t string) bool { return strings.HasPrefix(t, s) }) {
			return true
		}
	}
	return false
}

// waitHolds waits, with g.mu held (and held again on return, unless it
// fails), until no prefix hold but self covers one of keys.
func (g *keyGate) waitHolds(ctx context.Context, keys []string, self *prefixHold) error {
	for {
		var busy *prefixHold
		for _, h := range g.holds {
			if h != self && slices.ContainsFunc(keys, h.covers) {
				busy = h
				break
			}
		}
		if busy == nil {
			return nil
		}
		g.mu.Unlock()
		select {
		case <-busy.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
}

// enterBuilt enters the gate for a vote on keys that may also touch every
// key starting with one of keys, and with one of builds followed by one
// of keys. It returns the
// function to leave with, or ctx's error having left everything.
func (g *keyGate) enterBuilt(ctx context.Context, keys, builds []string) (func(), error) {
	h := &prefixHold{starts: slices.Clone(keys), done: make(chan struct{})}
	for _, b := range builds {
		for _, k := range keys {
			h.starts = append(h.starts, b+k)
		}
	}
	g.mu.Lock()
	for {
		i := slices.IndexFunc(g.holds, h.overlaps)
		if i < 0 {
			break
		}
		busy := g.holds[i]
		g.mu.Unlock()
		select {
		case <-busy.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		g.mu.Lock()
	}
	g.holds = append(g.holds, h)
	// The keys in use that it covers: it waits for their passes.
	inUse := slices.Clone(keys)
	for k := range g.m {
		if h.covers(k) {
			inUse = append(inUse, k)
		}
	}
	g.mu.Unlock()
	end := func() {
		g.mu.Lock()
		g.holds = slices.DeleteFunc(g.holds, func(o *prefixHold) bool { return o == h })
		g.mu.Unlock()
		close(h.done)
	}
	pass, err := g.enterAs(ctx, inUse, h)
	if err != nil {
		end()
		return nil, err
	}
	return func() {
		pass.leave()
		end()
	}, nil
}
