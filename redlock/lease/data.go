package lease

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The data operations: the single-Redis dialect's reads and writes, the
// counters, scripts run by vote. Each is package redlock's quorum
// operation of the same name, with the side effects on what this Manager
// remembers done here, so that no caller has to.
//
// Locks and data, one rule each (docs/safety.md, "Locks and data"): a
// lock is what a client acquires (Acquire, the compare-and-set and
// extend operations on its key); its copies carry at most MaxTTL, or it
// is a hold (keep.go), renewed by the tier. Data is every other write
// (Write, GetSet, Set, Incr, an expiry of a key that is not a lock, the
// keyed commands by vote): every backend stores exactly the expiry the
// client gave, none meaning none, with no lease, no renewal and no
// record, so that it survives any proxy outage. A data write over a
// held key takes the key, as on one Redis: the hold ends.

var (
	// ErrNoBackend: no backend answered a command sent to every backend
	// (list pops, publish).
	ErrNoBackend = errors.New("no backend answered")
	// ErrLockTTL: an expiry beyond MaxTTL of a lock, with no KeepTTL to
	// hold it by.
	ErrLockTTL = errors.New("a lock's ttl beyond max_ttl needs default_ttl > 0 to be held")
)

// TypeError refuses an operation on a key of another type than string.
type TypeError struct{ Type string }

func (e *TypeError) Error() string { return "the key holds a " + e.Type }

// lockKnown reports whether key is a lock now, so that an expiry of it
// (ExpireIf, Persist, Set XX, VoteExpiry) is a lock's: within MaxTTL, or
// held. It is when the value a quorum holds (v, or read when v is nil) is
// one a lock wrote: the token of a grant through here, the value of a
// hold kept here, or the digest of a hold in the record (as of this
// proxy's last round, else as a quorum of the record shows it; a
// hold of any value while the key exists). What this proxy remembers may
// be as old as a renewal or a round: a key written as data since,
// through any proxy (SET k v over a released or overwritten lock), holds
// another value and is data, its expiry exactly the client's. With
// beyond (the expiry asked is none or past MaxTTL, where a lock and data
// part ways), a key none of that names is asked of the backends: a lock
// with a ttl granted or extended through any proxy is marked there
// (redlock.Marked).
func (m *Manager) lockKnown(ctx context.Context, key string, v *redlock.Value, beyond bool) (bool, error) {
	lock, err := m.lockRemembered(ctx, key, v)
	if lock || err != nil || !beyond {
		return lock, err
	}
	return m.locker.Marked(ctx, key)
}

// lockRemembered is lockKnown from what the tier remembers: the grants
// through here, the holds kept here and the record.
func (m *Manager) lockRemembered(ctx context.Context, key string, v *redlock.Value) (bool, error) {
	tokens := m.reg.tokens(key)
	ks := m.reg.get(key)
	e, r := ks.kept, ks.recorded
	h := m.holds.Load()
	if len(tokens) == 0 && e == nil && r == nil && h == nil {
		return false, nil
	}
	if v == nil {
		got, err := m.locker.Get(ctx, key)
		if err != nil {
			return false, err
		}
		v = &got
	}
	if !v.Exists {
		return false, nil
	}
	digest := record.AnyDigest // a key of another type: only a hold of any value is its
	if v.Type == "" {
		digest = digestOf(v.Data)
		if slices.Contains(tokens, v.Data) {
			return true, nil
		}
	}
	switch {
	case e != nil && (e.AnyValue || e.digest == digest),
		r != nil && (r.Digest == record.AnyDigest || r.Digest == digest):
		return true, nil
	case h == nil:
		return false, nil
	}
	hold, ok, err := m.locker.ReadHold(ctx, h.Service, key)
	return ok && (hold.Digest == record.AnyDigest || hold.Digest == digest), err
}

// Write sets key to value on every node (redlock.Write), a data write:
// with ttl, or without expiry when ttl is 0.
func (m *Manager) Write(ctx context.Context, key, value string, ttl time.Duration) error {
	m.unkeep(key)
	err := m.locker.Write(ctx, key, value, ttl)
	m.reg.forget(key) // whatever was granted through here is overwritten
	return err
}

// CompareAndSet sets key to value where it holds old (redlock.
// CompareAndSet), with ttl, or without expiry when ttl is 0: a lock
// operation (SET … IFEQ renews a lock), so its copies carry at most
// MaxTTL and what the client asked beyond is held.
func (m *Manager) CompareAndSet(ctx context.Context, key, old, value string, ttl time.Duration) error {
	keep := ttl == 0 // held until released, as SETNX
	if m.maxTTL > 0 && !m.clamping() && (keep || ttl > m.maxTTL) {
		return ErrLockTTL // beyond max_ttl, or without expiry, and nothing to hold it by
	}
	ttl, until := m.splitTTL(ttl)
	if keep {
		ttl = m.keepTTL
	}
	if (keep || !until.IsZero()) && m.holdsFull(key) {
		return ErrMaxHolds
	}
	if old == value {
		m.unkeepValue(key, old) // its expiry changes: no renewal may undo it
	}
	_, err := m.locker.CompareAndSet(ctx, key, old, value, ttl)
	m.reg.forget(key)
	if err == nil && keep {
		m.keep(key, value)
	}
	m.holdUntil(err, key, value, until)
	return err
}

// GetSet sets key to value and returns what a quorum held before
// (redlock.GetSet), a data write with ttl, or without expiry when ttl is
// 0. A key a quorum holds of another type is refused with a *TypeError.
func (m *Manager) GetSet(ctx context.Context, key, value string, ttl time.Duration) (redlock.Value, error) {
	// A keep of this very value ends first, or its renewal could lease
	// what the write leaves; any other hold ends once the write landed (a
	// key of another type is not written, and a hash lock stays held).
	if e := m.reg.get(key).kept; e != nil && !e.AnyValue && e.digest == digestOf(value) {
		m.unkeepValue(key, value)
	}
	old, err := m.locker.GetSet(ctx, key, value, ttl)
	if err == nil && old.Exists && old.Type != "" {
		return old, &TypeError{Type: old.Type}
	}
	if err == nil {
		m.unkeep(key)
	}
	m.reg.forget(key)
	return old, err
}

// Get is the value a quorum holds (redlock.Get).
func (m *Manager) Get(ctx context.Context, key string) (redlock.Value, error) {
	return m.locker.Get(ctx, key)
}

// Read is the value and remaining ttl a quorum holds (redlock.Read); a
// held key reads with the expiry its client asked for (clientTTL), held
// here or through a peer.
func (m *Manager) Read(ctx context.Context, key string) (redlock.Value, error) {
	v, err := m.locker.Read(ctx, key)
	if err == nil && v.Exists {
		v.PTTL, err = m.clientTTL(ctx, key, v)
	}
	return v, err
}

// Exists counts the keys a quorum holds (redlock.Exists).
func (m *Manager) Exists(ctx context.Context, keys []string) (int, error) {
	return m.locker.Exists(ctx, keys)
}

// Delete stops keeping keys and deletes them on every node
// (redlock.Delete): the count of those a quorum held. A lock granted
// here is deleted in one round where it still holds its value
// (deleteEach).
func (m *Manager) Delete(ctx context.Context, keys []string) (int, error) {
	for _, k := range keys {
		if _, ok := m.heldValue(k); ok {
			return m.deleteEach(ctx, keys) // a lock granted here: delheld.go
		}
	}
	for _, k := range keys {
		m.unkeepGone(k, nil)
	}
	n, err := m.locker.Delete(ctx, keys)
	m.reg.forget(keys...)
	return n, err
}

// Expire gives key ttl on a quorum (redlock.Expire); the key is no
// longer kept (before it is sent: a renewal must not undo it).
func (m *Manager) Expire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	m.unkeep(key)
	ok, err := m.locker.Expire(ctx, key, ttl)
	m.reg.forget(key)
	return ok, err
}

// SetOptions are SET's conditions beyond NX (Manager.Set).
type SetOptions struct {
	XX      bool // write only where a quorum holds key
	KeepTTL bool // keep the ttl key has (none: without expiry)
	Expired bool // the deadline has passed: delete key instead of writing
	Strings bool // refuse a key of another type with a *TypeError (SET GET)
}

// Set is SET with XX, KEEPTTL, GET or a deadline already past: it reads key
// on a quorum (Read), then acts on what it read. An XX write of the value
// a lock known here holds (lockKnown), with a ttl, is an extend of that lock
// (redlock.ExtendKeys), within MaxTTL or held; if the key changed in
// between, a plain write. Any other write is a
// plain write (Write), a past deadline a delete (Delete). The read and the
// write are two quorum operations: a write by another client between them
// is not seen by the condition. It returns what key held before and
// whether it wrote (or deleted).
func (m *Manager) Set(ctx context.Context, key, value string, ttl time.Duration, o SetOptions) (redlock.Value, bool, error) {
	old, err := m.Read(ctx, key)
	switch {
	case err != nil:
		return old, false, err
	case o.Strings && old.Exists && old.Type != "":
		return old, false, &TypeError{Type: old.Type}
	case o.XX && !old.Exists:
		return old, false, nil
	case o.Expired:
		if old.Exists {
			_, err = m.Delete(ctx, []string{key})
		}
		return old, err == nil, err
	}
	if o.KeepTTL {
		ttl = 0
		if old.Exists && old.PTTL >= 0 {
			ttl = max(old.PTTL, time.Millisecond)
		}
	}
	lock := false
	if o.XX && !o.KeepTTL && ttl > 0 && old.Type == "" && old.Data == value {
		if lock, err = m.lockKnown(ctx, key, &old, m.beyond(ttl)); err != nil {
			return old, false, err
		}
	}
	if lock {
		if m.maxTTL > 0 && ttl > m.maxTTL && !m.clamping() {
			return old, false, ErrLockTTL
		}
		lease, until := m.splitTTL(ttl)
		_, err := m.Extend(ctx, []string{key}, value, lease, redlock.Replace)
		if !errors.Is(err, redlock.ErrNotHeld) {
			m.holdUntil(err, key, value, until)
			return old, err == nil, err
		}
	}
	err = m.Write(ctx, key, value, ttl)
	return old, err == nil, err
}

// ExpireCond is EXPIRE's options on the key's current expiry, a set of
// flags; 0 (ExpireAlways): none.
type ExpireCond int

const (
	ExpireAlways ExpireCond = 0
	ExpireNX     ExpireCond = 1 << iota // only when the key has no expiry
	ExpireXX                            // only when it has one
	ExpireGT                            // only when ttl is greater (no expiry is infinite: never)
	ExpireLT                            // only when ttl is less (no expiry is infinite: always)
)

// ExpireIf gives key ttl on a quorum where cond holds, as Redis's EXPIRE
// options: a ttl of 0 or less (a deadline now or past) deletes the key.
// Data gets ttl exactly; a lock (lockKnown) at most MaxTTL, and
// is held to a deadline beyond.
// It reports whether it did; false when key is absent or cond does not
// hold. A condition is checked on a quorum read (Read; a key kept here
// has no expiry) and then acted on: a write between the two is not seen.
func (m *Manager) ExpireIf(ctx context.Context, key string, ttl time.Duration, cond ExpireCond) (bool, error) {
	if cond != ExpireAlways {
		v, err := m.Read(ctx, key)
		if err != nil || !v.Exists {
			return false, err
		}
		has := v.PTTL >= 0
		switch {
		case cond&ExpireNX != 0 && has,
			cond&ExpireXX != 0 && !has,
			cond&ExpireGT != 0 && (!has || ttl <= v.PTTL),
			cond&ExpireLT != 0 && has && ttl >= v.PTTL:
			return false, nil
		}
	}
	if ttl <= 0 {
		n, err := m.Delete(ctx, []string{key})
		return n > 0, err
	}
	lease, until := ttl, time.Time{}
	lock, err := m.lockKnown(ctx, key, nil, m.beyond(ttl))
	if err != nil {
		return false, err
	}
	if lock {
		if m.maxTTL > 0 && ttl > m.maxTTL && !m.clamping() {
			return false, ErrLockTTL
		}
		lease, until = m.splitTTL(ttl)
		if !until.IsZero() && m.holdsFull(key) {
			return false, ErrMaxHolds
		}
	}
	if until.IsZero() && lock {
		if err := m.endPeerHold(ctx, key); err != nil {
			return false, err
		}
	}
	if !until.IsZero() {
		// A string is held while it holds its value, so that the hold ends
		// when another client takes the key again; a key of another type
		// while it exists.
		if v, err := m.Read(ctx, key); err == nil && v.Exists && v.Type == "" {
			_, err := m.locker.ExtendKeys(ctx, []string{key}, v.Data, lease, redlock.Replace)
			m.reg.forget(key)
			if err == nil {
				m.HoldKey(key, Hold{Value: v.Data, Deadline: until})
				return true, nil
			}
			if !errors.Is(err, redlock.ErrNotHeld) {
				return false, err
			}
			// changed since it was read: as for any key, below
		}
	}
	ok, err := m.Expire(ctx, key, lease)
	if err == nil && ok && !until.IsZero() {
		m.HoldKey(key, Hold{AnyValue: true, Deadline: until}) // a key of any type
	}
	return ok, err
}

// Persist takes away key's expiry. Data: PERSIST on a quorum
// (redlock.Persist). A lock (lockKnown) is held instead, its
// copies keeping a lease (renewed while it holds the value it holds now;
// a key of another type, a hash lock, while it exists, as a script by
// vote's is). True when it did; false when key is absent, already
// without expiry, or changed since it was read.
func (m *Manager) Persist(ctx context.Context, key string) (bool, error) {
	lock, err := m.lockKnown(ctx, key, nil, m.beyond(0))
	if err != nil {
		return false, err
	}
	if lock && m.keepTTL == 0 && m.maxTTL > 0 {
		return false, ErrLockTTL // a lock without expiry needs a lease to hold it by
	}
	if !lock {
		m.unkeep(key)
		ok, err := m.locker.Persist(ctx, key)
		m.reg.forget(key)
		return ok, err
	}
	if m.holdsFull(key) {
		return false, ErrMaxHolds
	}
	v, err := m.Read(ctx, key)
	switch {
	case err != nil:
		return false, err
	case !v.Exists || v.PTTL < 0:
		return false, nil
	case v.Type != "":
		// The lease on a quorum, then the hold: a renewal of any value
		// gives it the lease again while the key exists.
		ok, err := m.locker.Expire(ctx, key, m.keepTTL)
		m.reg.forget(key)
		if err == nil && ok {
			m.HoldKey(key, Hold{AnyValue: true})
		}
		return ok, err
	}
	_, err = m.locker.ExtendKeys(ctx, []string{key}, v.Data, m.keepTTL, redlock.Replace)
	m.reg.forget(key)
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
	m.reg.forgetAll()
	if err == nil {
		m.unkeepAll()
	}
	return err
}

// Incr adds by to the counter key so that it grows across the nodes
// (redlock.Incr).
func (m *Manager) Incr(ctx context.Context, key string, by int64) (int64, error) {
	n, err := m.locker.Incr(ctx, key, by)
	m.reg.forget(key) // data now: a lock it changed in place is dropped to data by its next renewal
	return n, err
}

// Vote runs s on every node and returns the reply a quorum agreed on
// (redlock.Vote). When the script writes, keys may have been released:
// their first waiters try again at once; and it runs clamped (clamp.go):
// no copy it leaves outlives the max ttl, and what a quorum wanted longer
// is held. A script's shebang decides before its analysis (writes): with
// no-writes it is a read, since Redis refuses its writes; without, it is
// a write, since Redis refuses it under EVALSHA_RO, which sends a read.
func (m *Manager) Vote(ctx context.Context, s *script.Script, keys, argv []string, writes bool) (any, error) {
	if s.NoWrites() || !writes && !s.DeclaresWrites() {
		if held := m.declaredHolds(keys); held != nil {
			argv = append(slices.Clone(argv), script.HeldArgs(held)...)
			return m.locker.VoteRead(ctx, s.GuardedHeld(), keys, argv)
		}
		return m.locker.VoteRead(ctx, s.Guarded(), keys, argv)
	}
	if !m.clamping() {
		for _, k := range keys {
			m.unkeep(k) // what the script leaves is not the kept write's
		}
	}
	start := m.now()
	clamped := m.clamped(s)
	if held := m.declaredHolds(keys); held != nil {
		clamped = s.ClampedHeld(m.maxTTL, min(m.keepTTL, m.maxTTL))
		argv = append(slices.Clone(argv), script.HeldArgs(held)...)
	}
	// On the old instance too, during a migration.
	v, w, err := m.locker.VoteClamped(ctx, clamped, keys, argv)
	m.reg.forget(keys...) // it may have written some nodes
	if s.Builds() != nil {
		m.reg.forgetBuilt() // and keys it built, which no note names
	}
	if err != nil {
		return v, err
	}
	m.holdWanted(start, w)
	m.holdAnyValue(w)
	m.changed(keys)
	return v, nil
}

// VoteData runs a command that writes data by vote (a keyed command:
// HSET, SADD, RPUSH, APPEND, MSET, COPY …, as a script that only calls
// it): the copies keep exactly the expiry the command leaves, with no
// clamp, no lease and no hold, whatever its keys were. A write that
// replaces a lock's value (MSET, SETEX, COPY … REPLACE) takes the key as
// on one Redis: it is data now, and the hold of the value it replaced
// ends at its next renewal (the copy's expiry is no longer the one the
// hold stamped). One that changes a held value in place (APPEND,
// SETRANGE, HSET on a held string…) leaves the hold to its renewal,
// which gives the changed key the client's expiry (none, or the hold's
// deadline) and drops the hold, as for Incr. Only an expiry of a lock
// (VoteExpiry) is a lock's.
func (m *Manager) VoteData(ctx context.Context, s *script.Script, keys, argv []string) (any, error) {
	v, _, err := m.locker.VoteClamped(ctx, s.Guarded(), keys, argv) // ordered, and on migrate_from
	m.reg.forget(keys...)
	if err == nil {
		m.changed(keys)
	}
	return v, err
}

// VoteExpiry runs a command by vote that may set its key's expiry and
// keep its value (GETEX EX|PX|EXAT|PXAT|PERSIST): on data, as VoteData;
// on a lock (lockKnown), as any script by vote (Vote): its copies within
// MaxTTL, and held beyond.
func (m *Manager) VoteExpiry(ctx context.Context, s *script.Script, keys, argv []string) (any, error) {
	for _, k := range keys {
		lock, err := m.lockKnown(ctx, k, nil, m.beyond(0))
		if err != nil {
			return nil, err
		}
		if lock {
			return m.Vote(ctx, s, keys, argv, true)
		}
	}
	return m.VoteData(ctx, s, keys, argv)
}

// MigrateStats is what migrate_from has seen, for INFO and metrics.
func (m *Manager) MigrateStats() redlock.MigrateStats { return m.locker.MigrateStats() }

// Backends is every node's health (redlock.Status), how many vote now and
// the quorum, for INFO.
func (m *Manager) Backends() (status []redlock.NodeStatus, voting, quorum int) {
	return m.locker.Status(), m.locker.Voting(), m.locker.Quorum()
}
