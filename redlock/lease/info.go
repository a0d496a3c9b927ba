package lease

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Info is what a quorum read and this Manager's memory say about a key
// (LOCKINFO). It never holds the token.
type Info struct {
	// TTL is the remaining ttl a quorum read reports; redlock.PTTLNoExpiry
	// for a key written without expiry.
	TTL time.Duration
	// Validity is what is left of the validity this Manager reported for
	// the lock (or last extended); for a lock it did not grant, TTL.
	Validity     time.Duration
	NodesHolding int // backends holding the quorum's value
	Nodes        int // backends
	Fence        int64
	Fenced       bool // granted here with a fencing token
	Mine         bool // granted here to the owner asking
	Session      bool // a SESSION lock
	Waiters      int  // requests queued here for the key
}

// Info reads key on a quorum and asks every backend, within the node
// timeout, whether it holds the quorum's value. ok is false when the key
// is free.
func (m *Manager) Info(ctx context.Context, key string, owner *Owner) (info Info, ok bool, err error) {
	v, err := m.locker.Read(ctx, key)
	if err != nil || !v.Exists || v.Type != "" {
		return Info{}, false, err // a key of another type is no lock of ours
	}
	info.NodesHolding, info.Nodes = m.locker.Holding(ctx, key, v.Data)
	info.TTL, info.Validity = v.PTTL, v.PTTL
	if h := m.reg.byToken(key, v.Data); h != nil {
		deadline, _, _ := m.reg.state(h)
		info.Validity = max(deadline.Sub(m.now()), 0)
		info.Fence, info.Fenced = h.fence, h.fenced
		info.Mine = owner != nil && h.owner == owner
		info.Session = h.session
	}
	if info.TTL, err = m.clientTTL(ctx, key, v); err != nil {
		return Info{}, false, err
	}
	if info.TTL == redlock.PTTLNoExpiry {
		info.Validity = redlock.PTTLNoExpiry
	}
	info.Waiters = m.reg.waiting(key)
	return info, true, nil
}

// Held is one lock granted through this Manager (Snapshot).
type Held struct {
	Keys      []string
	OwnerID   int64
	OwnerName string
	Age       time.Duration // since the grant was answered
	Validity  time.Duration // left of the validity last reported
	TTL       time.Duration // as asked for
	Session   bool
	Fence     int64
	Fenced    bool
}

// Snapshot lists the remembered locks that were not released and have not
// expired, by first key.
func (m *Manager) Snapshot() []Held {
	now := m.now()
	ls := m.reg.snapshot()
	out := make([]Held, 0, len(ls))
	for _, h := range ls {
		if v, ok := m.heldOf(h, now); ok {
			out = append(out, v)
		}
	}
	return out
}

// heldOf is what Snapshot shows of h at now; false once h was released or
// expired.
func (m *Manager) heldOf(h *heldLock, now time.Time) (Held, bool) {
	deadline, _, gone := m.reg.state(h)
	if gone {
		return Held{}, false
	}
	return Held{
		Keys: h.keys, OwnerID: h.owner.id, OwnerName: h.owner.name(),
		Age: now.Sub(h.granted), Validity: max(deadline.Sub(now), 0), TTL: h.ttl,
		Session: h.session, Fence: h.fence, Fenced: h.fenced,
	}, true
}
