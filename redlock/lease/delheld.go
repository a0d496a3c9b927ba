package lease

import (
	"context"
	"slices"
)

// DEL of a lock granted here, in one quorum round: a compare-and-delete
// of the value this proxy wrote (redlock.DeleteHeld) that, where a quorum
// deleted it, is the lock's release; where the key changed since, DEL as
// for any key. docs/safety.md, "DEL of a lock granted here", says why DEL
// keeps its meaning.

// heldValue is the value this proxy wrote to key as a lock it granted or
// keeps and still knows: a string kept here, or the note of a grant with
// an expiry (registry.knows), unless key is one of several keys of a
// remembered lock (MLOCK) or a SESSION's: those are released as a whole,
// by their own commands. false: not known.
func (m *Manager) heldValue(key string) (string, bool) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	switch s := m.reg.keys[key]; {
	case s.kept != nil:
		return s.kept.Value, !s.kept.AnyValue
	case s.grant == nil, s.held != nil && (len(s.held.keys) > 1 || s.held.session):
		return "", false
	default:
		return s.grant.token, true
	}
}

// deleteEach is Delete of keys of which some are locks known here
// (heldValue), one key at a time, each in its own quorum operation: the
// count of those that existed. On an error the keys before the failing
// one are deleted, as with redlock.Delete.
func (m *Manager) deleteEach(ctx context.Context, keys []string) (int, error) {
	n := 0
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			continue // DEL k k counts k once
		}
		var existed bool
		var err error
		if v, ok := m.heldValue(k); ok {
			existed, err = m.deleteHeld(ctx, k, v)
		} else {
			m.unkeepGone(k, nil)
			var c int
			c, err = m.locker.Delete(ctx, []string{k})
			m.reg.forget(k)
			existed = c > 0
		}
		if err != nil {
			return 0, err
		}
		if existed {
			n++
		}
	}
	return n, nil
}

// deleteHeld deletes key, known here to hold value: a release of that
// value when a quorum deleted it (its hold ends, its record here is
// dropped, its first waiter here tries at once), else the plain delete
// redlock.DeleteHeld falls back to. It reports whether the key existed.
func (m *Manager) deleteHeld(ctx context.Context, key, value string) (bool, error) {
	m.unkeepGone(key, nil)
	existed, released, err := m.locker.DeleteHeld(ctx, key, value)
	m.reg.forget(key)
	if released {
		m.stats.released.Add(1)
		m.reg.released(key, value)
	}
	return existed, err
}
