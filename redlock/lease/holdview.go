package lease

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The client's view of a held key (docs/safety.md, "Holds"): its copies
// carry a lease of at most KeepTTL, renewed by the tier, while a
// client asks and decides on the expiry it gave (none, or a deadline
// beyond max_ttl), through whichever proxy of the tier it talks to. A key
// whose quorum read shows a ttl a lease could be (0..KeepTTL) may be
// held, here or through a peer (possibly written less than a round
// ago, or ended by a peer since), so its field is read from a quorum of
// the record (one more quorum round, for such reads only): the record,
// not the copies nor this proxy's memory, says the expiry.

// clientTTL is the ttl a client sees of v, read of key on a quorum: the
// hold's (HeldTTL, or the record's when another proxy keeps it), else
// v.PTTL. A record that cannot be read from a quorum fails the read: an
// answer from the lease could make the caller end the hold (SET KEEPTTL,
// EXPIRE XX).
func (m *Manager) clientTTL(ctx context.Context, key string, v redlock.Value) (time.Duration, error) {
	h := m.holds.Load()
	if h == nil { // no record (unit tests): this proxy's holds are all there is
		if ttl, ok := m.HeldTTL(key, v.Data); ok {
			return ttl, nil
		}
		return v.PTTL, nil
	}
	if v.PTTL < 0 || v.PTTL > m.keepTTL {
		return v.PTTL, nil // not a lease: no hold gives its copies more
	}
	// The record on a quorum, even for a hold kept here: another proxy may
	// have ended it (an expiry written through it) since.
	r, ok, err := m.locker.ReadHold(ctx, h.Service, key)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return v.PTTL, nil
	case r.Digest != record.AnyDigest && (v.Type != "" || r.Digest != digestOf(v.Data)):
		return v.PTTL, nil // a hold of another value: it ends at the renewal
	case r.Deadline == 0:
		return redlock.PTTLNoExpiry, nil
	}
	if left := time.UnixMilli(r.Deadline).Sub(m.now()); left > v.PTTL {
		return left, nil
	}
	return v.PTTL, nil // its last lease runs to the deadline
}

// endPeerHold ends, before an expiry of key is written through this
// proxy, a hold of key that a peer recorded after this proxy's last
// round (unkeep ends those the round saw): else the next renewal would
// give the key its lease again over the client's expiry. One
// quorum write (EndHold) when holds are recorded and key is neither kept
// here nor seen in the record; it does nothing where no field exists.
func (m *Manager) endPeerHold(ctx context.Context, key string) error {
	h, s := m.holds.Load(), m.reg.get(key)
	if h == nil || s.kept != nil || s.recorded != nil {
		return nil // no record, kept here, or seen: unkeep ends it (endRecorded)
	}
	return m.locker.EndHold(ctx, h.Service, key, "")
}

// declaredHolds is, for a clamped script by vote, the hold of each declared
// key (script.Script.ClampedHeld): kept here, or seen in the record at the last
// round (a hold made through a peer since is not known: the script
// sees its lease). Nil when none is held: the script runs as any other.
func (m *Manager) declaredHolds(keys []string) []script.DeclaredHold {
	if !m.clamping() {
		return nil
	}
	now := m.now()
	var out []script.DeclaredHold
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	for i, key := range keys {
		var h script.DeclaredHold
		if s := m.reg.keys[key]; s.kept != nil {
			h = script.DeclaredHold{Held: true, Deadline: unixMs(s.kept.Deadline), Digest: s.kept.digest}
		} else if r := s.recorded; r != nil {
			h = script.DeclaredHold{Held: true, Deadline: r.Deadline, Digest: r.Digest}
		}
		switch {
		case !h.Held:
		case h.Deadline == 0:
			h.Deadline, h.TTL = -1, -1
		default:
			h.TTL = time.UnixMilli(h.Deadline).Sub(now).Milliseconds()
			h.Held = h.TTL > 0 // past its deadline: it expires by itself
		}
		if h.Held && out == nil {
			out = make([]script.DeclaredHold, len(keys))
		}
		if out != nil {
			out[i] = h
		}
	}
	return out
}

// HeldExpiry is the expiry the client gave key, held here or through a
// peer (the record), whatever its value, for a command that copies it
// (COPY): ok false when key is not held. It costs a quorum read, and
// the record's field when the ttl could be a lease (clientTTL).
func (m *Manager) HeldExpiry(ctx context.Context, key string) (time.Duration, bool, error) {
	if m.holds.Load() == nil { // no record (unit tests): this proxy's holds are all there is
		ttl, ok := m.HeldAnyTTL(key)
		return ttl, ok, nil
	}
	// The record, even for a hold made here: another proxy may have
	// changed its deadline (PERSIST, EXPIRE) since.
	v, err := m.locker.Read(ctx, key)
	if err != nil || !v.Exists {
		return 0, false, err
	}
	ttl, err := m.clientTTL(ctx, key, v)
	if err != nil || ttl == v.PTTL {
		return 0, false, err
	}
	return ttl, true, nil
}
