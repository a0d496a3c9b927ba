package lease

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// What an operator reads and does beyond a client's own locks: the holds,
// the busiest keys, and a release whatever the token (LOCKADMIN, the
// status page).

// HoldEntry is one hold: a key kept beyond its copies' lease, renewed here
// or by another proxy of the tier.
type HoldEntry struct {
	Key      string
	Here     bool      // made through this proxy, which renews it while it lives
	Deadline time.Time // the client's expiry; zero: none
}

// Holds lists the holds made here and those the holds record showed at
// the last renewal round, by key.
func (m *Manager) Holds() []HoldEntry {
	var out []HoldEntry
	m.reg.mu.Lock()
	for k, s := range m.reg.keys {
		switch {
		case s.kept != nil:
			out = append(out, HoldEntry{Key: k, Here: true, Deadline: s.kept.Deadline})
		case s.recorded != nil && s.recorded.Deadline > 0:
			out = append(out, HoldEntry{Key: k, Deadline: time.UnixMilli(s.recorded.Deadline)})
		case s.recorded != nil:
			out = append(out, HoldEntry{Key: k})
		}
	}
	m.reg.mu.Unlock()
	slices.SortFunc(out, func(a, b HoldEntry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// HoldCount is the number of keys this proxy renews as holds now.
func (m *Manager) HoldCount() int {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	return m.reg.nKept
}

// KeyLoad is how busy one key is on this proxy.
type KeyLoad struct {
	Key     string
	Waiters int           // LOCK … WAIT callers queued here
	Held    bool          // granted through this proxy and not released
	Age     time.Duration // since the grant, when Held
}

// HotKeys returns up to n keys with the most waiters queued here, then
// the longest held through this proxy. It keeps no counter of its own:
// the registry's queues and grants are the measure.
func (m *Manager) HotKeys(n int) []KeyLoad {
	now := m.now()
	r := &m.reg
	r.mu.Lock()
	var out []KeyLoad
	for k, s := range r.keys {
		e := KeyLoad{Key: k, Waiters: len(s.queue)}
		if l := s.held; l != nil && !l.gone {
			e.Held, e.Age = true, now.Sub(l.granted)
		}
		if e.Waiters > 0 || e.Held {
			out = append(out, e)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b KeyLoad) int {
		if c := cmp.Compare(b.Waiters, a.Waiters); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Age, a.Age); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out[:min(n, len(out))]
}

// ForceRelease deletes key whatever its token: the value a quorum holds
// is released as if its holder had sent it (so a SESSION lock here stops
// renewing, a hold stops being kept, waiters here and on other proxies
// are woken), and a key of another type (a library's hash lock) is
// deleted as it is, whoever holds it by then. A key of an MLOCK granted
// here is released with the lock's other keys: the lock is one, and its
// holder is not told. by names who asked, for the log and the events. It
// reports false when the key was free or a string changed holder
// meanwhile (nothing was deleted); redlock.ErrNoQuorum when the backends
// could not say.
func (m *Manager) ForceRelease(ctx context.Context, key, by string) (bool, error) {
	v, err := m.locker.Get(ctx, key)
	switch {
	case err != nil:
		return false, err
	case !v.Exists:
		return false, nil
	}
	released := false
	if v.Type != "" {
		n, derr := m.Delete(ctx, []string{key})
		released, err = n > 0, derr
	} else if h := m.reg.byToken(key, v.Data); h != nil && len(h.keys) > 1 {
		var states []redlock.KeyState
		states, err = m.ReleaseKeys(ctx, h.keys, v.Data)
		released = err == nil && slices.Contains(states, redlock.Released)
	} else {
		err = m.Release(ctx, key, v.Data)
		released = err == nil
		if errors.Is(err, redlock.ErrNotHeld) {
			err = nil
		}
	}
	if released {
		m.log.Warn("lock force-released", "key", key, "by", by)
		m.locker.Events().Add(redlock.EventForceReleased, key, "by "+by)
	}
	return released, err
}

// HeldBy is the grant of key through this proxy that is neither released
// nor expired, if any: the connection it was granted to.
func (m *Manager) HeldBy(key string) (Held, bool) {
	if h := m.reg.lookup(key); h != nil {
		return m.heldOf(h, m.now())
	}
	return Held{}, false
}
