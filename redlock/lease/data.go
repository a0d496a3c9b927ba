package lease

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// The data operations: the single-Redis dialect's reads and writes, the
// counters, scripts run by vote. Each is package redlock's quorum
// operation of the same name, with the side effects on what this Manager
// remembers done here, so that no caller has to: a write without expiry
// is kept (keep.go) and any other write, delete or expire stops keeping
// the key; a write by vote wakes the key's waiters.

var (
	// ErrNoKeepTTL: a key cannot be kept without expiry, Options.KeepTTL
	// being 0 (Persist).
	ErrNoKeepTTL = errors.New("keys without expiry need a KeepTTL")
	// ErrNoBackend: no backend answered a command sent to every backend
	// (list pops, publish).
	ErrNoBackend = errors.New("no backend answered")
)

// TypeError refuses an operation on a key of another type than string.
type TypeError struct{ Type string }

func (e *TypeError) Error() string { return "the key holds a " + e.Type }

// leaseTTL is the ttl a write is made with: its own, or for a write
// without expiry (ttl 0) the lease that the Manager renews (0 when KeepTTL
// is 0: no expiry at all).
func (m *Manager) leaseTTL(ttl time.Duration) time.Duration {
	if ttl == 0 {
		return m.keepTTL
	}
	return ttl
}

// Write sets key to value on every node (redlock.Write), with ttl, or
// without expiry when ttl is 0.
func (m *Manager) Write(ctx context.Context, key, value string, ttl time.Duration) error {
	m.beginWrite(key)
	err := m.locker.Write(ctx, key, value, m.leaseTTL(ttl))
	m.endWrite(err, key, value, ttl)
	return err
}

// CompareAndSet sets key to value where it holds old (redlock.
// CompareAndSet), with ttl, or without expiry when ttl is 0.
func (m *Manager) CompareAndSet(ctx context.Context, key, old, value string, ttl time.Duration) error {
	m.beginWrite(key)
	_, err := m.locker.CompareAndSet(ctx, key, old, value, m.leaseTTL(ttl))
	m.endWrite(err, key, value, ttl)
	return err
}

// GetSet sets key to value and returns what a quorum held before
// (redlock.GetSet), with ttl, or without expiry when ttl is 0.
func (m *Manager) GetSet(ctx context.Context, key, value string, ttl time.Duration) (redlock.Value, error) {
	m.beginWrite(key)
	old, err := m.locker.GetSet(ctx, key, value, m.leaseTTL(ttl))
	m.endWrite(err, key, value, ttl)
	return old, err
}

// Get is the value a quorum holds (redlock.Get).
func (m *Manager) Get(ctx context.Context, key string) (redlock.Value, error) {
	return m.locker.Get(ctx, key)
}

// Read is the value and remaining ttl a quorum holds (redlock.Read); a
// key kept here reads as without expiry.
func (m *Manager) Read(ctx context.Context, key string) (redlock.Value, error) {
	v, err := m.locker.Read(ctx, key)
	if err == nil && v.Exists && m.Kept(key, v.Data) {
		v.PTTL = redlock.PTTLNoExpiry
	}
	return v, err
}

// Exists counts the keys a quorum holds (redlock.Exists).
func (m *Manager) Exists(ctx context.Context, keys []string) (int, error) {
	return m.locker.Exists(ctx, keys)
}

// Delete stops keeping keys and deletes them on every node
// (redlock.Delete): the count of those a quorum held.
func (m *Manager) Delete(ctx context.Context, keys []string) (int, error) {
	for _, k := range keys {
		m.unkeep(k)
	}
	return m.locker.Delete(ctx, keys)
}

// Expire gives key ttl on a quorum (redlock.Expire); when it did, the key
// is no longer kept.
func (m *Manager) Expire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	ok, err := m.locker.Expire(ctx, key, ttl)
	if err == nil && ok {
		m.unkeep(key)
	}
	return ok, err
}

// Persist takes away key's expiry as far as clients can tell: the key is
// kept (renewed while it holds the value it holds now). True when it did;
// false when key is absent, already without expiry, or changed since it
// was read. A key of another type is refused with a *TypeError; without a
// KeepTTL, with ErrNoKeepTTL.
func (m *Manager) Persist(ctx context.Context, key string) (bool, error) {
	v, err := m.Read(ctx, key)
	switch {
	case err != nil:
		return false, err
	case !v.Exists || v.PTTL < 0:
		return false, nil
	case v.Type != "":
		return false, &TypeError{Type: v.Type}
	case m.keepTTL == 0:
		return false, ErrNoKeepTTL
	}
	_, err = m.locker.ExtendKeys(ctx, []string{key}, v.Data, m.keepTTL, redlock.Replace)
	switch {
	case err == nil:
		m.keep(key, v.Data)
		return true, nil
	case errors.Is(err, redlock.ErrNotHeld):
		return false, nil
	}
	return false, err
}

// FlushAll deletes every key on every node (redlock.FlushAll) and stops
// keeping any.
func (m *Manager) FlushAll(ctx context.Context) error {
	err := m.locker.FlushAll(ctx)
	if err == nil {
		m.unkeepAll()
	}
	return err
}

// Incr adds by to the counter key so that it grows across the nodes
// (redlock.Incr).
func (m *Manager) Incr(ctx context.Context, key string, by int64) (int64, error) {
	return m.locker.Incr(ctx, key, by)
}

// Vote runs script on every node and returns the reply a quorum agreed on
// (redlock.Vote). When the script writes, keys may have been released:
// their first waiters try again at once.
func (m *Manager) Vote(ctx context.Context, script *redlock.Script, keys, argv []string, writes bool) (any, error) {
	vote := m.locker.Vote
	if writes {
		vote = m.locker.VoteWrites // on the old instance too, during a migration
	}
	v, err := vote(ctx, script, keys, argv)
	if err == nil && writes {
		m.changed(keys)
	}
	return v, err
}

// MigrateStats is what migrate_from has seen, for INFO and metrics.
func (m *Manager) MigrateStats() redlock.MigrateStats { return m.locker.MigrateStats() }

// Backends is every node's health (redlock.Status), how many vote now and
// the quorum, for INFO.
func (m *Manager) Backends() (status []redlock.NodeStatus, voting, quorum int) {
	return m.locker.Status(), m.locker.Voting(), m.locker.Quorum()
}
