package lease

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/migrate"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// Locks without expiry (SET k v NX, SETNX, SET … IFEQ without expiry,
// PERSIST of a lock): on one Redis the key stays until it is deleted.
// Through the proxy it is written with a lease of Options.KeepTTL and
// kept: renewed, with a compare-and-expire, while it still holds the value
// written, until it is released, overwritten, deleted or given an expiry.
// (Data written without expiry carries none: data.go.) A holder that works
// longer than KeepTTL keeps its lock, as on one Redis. Once StartHolds
// ran, every keep is also a field of the holds record on the backends
// (holds.go), written before the write is answered, so that the tier
// renews it when this proxy stops.
//
// One goroutine, started on the first keep and ended when nothing is kept,
// renews what is due every KeepTTL/6, so a key is renewed between a third
// and a half of its lease in.

// kept is one key renewed here. Hold and digest never change; the rest
// is guarded by registry.mu.
type kept struct {
	Hold
	digest string    // of Value, or record.AnyDigest: what the renewal compares
	due    time.Time // next renewal
	busy   bool      // a renewal is in flight
	// unrecorded: its record failed; the renewal records it first.
	unrecorded bool
	// renewed is closed when the renewal in flight (busy) returns.
	renewed chan struct{}
}

// digestOf is the record's digest of value: its SHA-1, hex.
func digestOf(value string) string {
	sum := sha1.Sum([]byte(value))
	return hex.EncodeToString(sum[:])
}

// recordOf is e as the hold of key in the record.
func (e *kept) recordOf(key string) record.Field {
	return record.Field{Key: key, Deadline: unixMs(e.Deadline), Digest: e.digest}
}

// holds reports whether e keeps value.
func (e *kept) holds(value string) bool { return e.AnyValue || e.digest == digestOf(value) }

// Hold is what a client asked for beyond the copies' lease: a key kept
// while it holds Value (or, with AnyValue, while it exists: a key of any
// type a script by vote left), until Deadline (zero: without expiry).
// Each renewal gives the copies min(KeepTTL, Deadline-now); once the
// Deadline is near, the key expires by itself.
type Hold struct {
	Value    string
	AnyValue bool
	Deadline time.Time
}

// HoldKey keeps key as h says (see Hold), replacing what was kept for
// it. Call it after a write of key bounded to the lease succeeded where
// the client asked for longer; a deadline within the lease needs no hold.
//
// Once StartHolds ran, it records the hold on a quorum of backends before
// it returns (one quorum round), so that the tier renews it if this proxy
// stops: call it before the client's write is answered.
func (m *Manager) HoldKey(key string, h Hold) {
	m.reg.mu.Lock()
	e := m.holdLocked(key, h)
	m.reg.mu.Unlock()
	m.record(key, e)
}

// HeldTTL is the remaining ttl a client sees of key holding value (any
// value for a hold of AnyValue): PTTLNoExpiry for a hold without
// deadline; false when key is not held here.
func (m *Manager) HeldTTL(key, value string) (time.Duration, bool) {
	if k := m.reg.get(key).kept; k != nil && k.holds(value) {
		return m.ttlOf(k), true
	}
	return 0, false
}

// HeldAnyTTL is HeldTTL of a hold or keep of key whatever value it is of:
// the expiry the proxy answers for key, which a copy of it (COPY) takes.
func (m *Manager) HeldAnyTTL(key string) (time.Duration, bool) {
	if k := m.reg.get(key).kept; k != nil {
		return m.ttlOf(k), true
	}
	return 0, false
}

// ttlOf is the ttl a client sees of a key kept as k.
func (m *Manager) ttlOf(k *kept) time.Duration {
	if k.Deadline.IsZero() {
		return redlock.PTTLNoExpiry
	}
	return max(k.Deadline.Sub(m.now()), time.Millisecond)
}

// keep renews key while it holds value (see above); it replaces what was
// kept for key. Call it after a write without expiry of value to key
// succeeded. Without a KeepTTL it does nothing: such writes then carry no
// expiry at all.
func (m *Manager) keep(key, value string) {
	m.reg.mu.Lock()
	e := m.keepLocked(key, value)
	m.reg.mu.Unlock()
	m.record(key, e)
}

// keepRecorded is keep of a key whose hold the backends recorded with
// the write itself (redlock.AcquireHold).
func (m *Manager) keepRecorded(key, value string) {
	m.reg.mu.Lock()
	m.keepLocked(key, value)
	m.reg.mu.Unlock()
}

// keepLocked is keep with the registry's lock held, but for the record: the
// caller records what it returns once it let go of the lock.
func (m *Manager) keepLocked(key, value string) *kept { return m.holdLocked(key, Hold{Value: value}) }

// holdLocked is HoldKey with the registry's lock held, but for the record:
// it returns what the caller records once it let go of the lock (nil:
// nothing, without a KeepTTL).
func (m *Manager) holdLocked(key string, h Hold) *kept {
	if m.keepTTL <= 0 {
		return nil
	}
	e := &kept{Hold: h, digest: record.AnyDigest, due: m.now().Add(m.keepTTL / 3)}
	if !h.AnyValue {
		e.digest = digestOf(h.Value)
	}
	r := &m.reg
	if s := r.keys[key]; s.recorded == nil && s.kept == nil {
		r.made++
	}
	r.setKept(key, e)
	if !r.running && !m.closing.Load() {
		r.running = true
		m.bg.Go(m.keepLoop)
	}
	return e
}

// unkeep stops renewing key: it was overwritten, deleted or given an
// expiry through this proxy. Before it returns, its hold is ended in the
// record (kept here, or made through another proxy: endRecorded).
func (m *Manager) unkeep(key string) {
	e, wait := m.unkeepIf(key, nil)
	m.awaitRenewal(wait)
	if e != nil {
		m.unrecord(key, e)
	} else {
		m.endRecorded(key, nil)
	}
}

// unkeepGone stops renewing key if it is kept (holding value, unless
// value is nil) before an operation that deletes the key (a release, a
// delete): the record's field is left to go by itself, for the field of a
// key that no longer holds its value (or whose copy is not the one the
// hold stamped) is dropped by the next renewal or round that reads
// it. One quorum round less than unkeep on the way to the reply.
func (m *Manager) unkeepGone(key string, value *string) {
	_, wait := m.unkeepIf(key, value)
	m.awaitRenewal(wait)
}

// unkeepIf ends key's keep if it holds value (any value when value is
// nil): the keep ended (nil: none) and its renewal in flight (inFlight).
func (m *Manager) unkeepIf(key string, value *string) (*kept, <-chan struct{}) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	if k := m.reg.keys[key].kept; k != nil && (value == nil || k.holds(*value)) {
		m.reg.setKept(key, nil)
		return k, k.inFlight()
	}
	return nil, nil
}

// unkeepValue stops renewing key if it is kept holding value (a release
// of that token, or an extend that gave it an expiry), and ends its hold
// in the record before it returns (made here or through another proxy).
func (m *Manager) unkeepValue(key, value string) {
	e, wait := m.unkeepIf(key, &value)
	m.awaitRenewal(wait)
	if e != nil {
		m.unrecord(key, e)
	} else {
		m.endRecorded(key, &value)
	}
}

// startRenewal marks e as being renewed. The registry's lock is held.
func (e *kept) startRenewal() {
	e.busy = true
	e.renewed = make(chan struct{})
}

// inFlight is what closes when e's renewal in flight returns; nil when
// none is (or e is nil). The registry's lock is held.
func (e *kept) inFlight() <-chan struct{} {
	if e == nil || !e.busy {
		return nil
	}
	return e.renewed
}

// awaitRenewal waits for a renewal in flight of a key whose keep just
// ended (wait from inFlight; nil: none), at most releaseTimeout: the write
// that ends a keep (an expiry, a release) must land after the renewal on
// every backend, or the renewal's lease would replace the expiry the
// client gave. The renewal's calls are on each backend's connection once
// it returns, ahead of the write's.
func (m *Manager) awaitRenewal(wait <-chan struct{}) {
	if wait == nil {
		return
	}
	t := time.NewTimer(releaseTimeout)
	defer t.Stop()
	select {
	case <-wait:
	case <-t.C:
	case <-m.life.Done():
	}
}

// keeps reports whether key is kept here: the rounds leave it alone.
func (m *Manager) keeps(key string) bool { return m.reg.get(key).kept != nil }

// unkeepAll stops renewing every key (FLUSHDB).
func (m *Manager) unkeepAll() {
	m.reg.mu.Lock()
	for k, s := range m.reg.keys {
		if s.kept != nil {
			m.reg.setKept(k, nil)
		}
	}
	m.reg.mu.Unlock()
}

// KeepTTL is the lease of writes without expiry; 0: they carry none.
func (m *Manager) KeepTTL() time.Duration { return m.keepTTL }

// keepLoop renews what is due until nothing is kept or the Manager shuts
// down.
func (m *Manager) keepLoop() {
	t := time.NewTicker(max(m.keepTTL/6, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.stopWaits: // Shutdown began
			return
		case <-t.C:
		}
		r := &m.reg
		r.mu.Lock()
		if r.nKept == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		now := m.now()
		h := m.holds.Load()
		var keys []string
		var es []*kept
		for key, s := range r.keys {
			e := s.kept
			if e == nil || e.busy || now.Before(e.due) {
				continue
			}
			e.startRenewal()
			if h == nil || e.unrecorded || !e.Deadline.IsZero() && e.Deadline.Sub(now) <= m.keepTTL {
				m.bg.Go(func() { m.renewKept(key, e) }) // alone: no record, or its last lease
				continue
			}
			keys, es = append(keys, key), append(es, e)
			if len(keys) == renewPage {
				bk, be := keys, es
				m.bg.Go(func() { m.renewBatch(h, bk, be) })
				keys, es = nil, nil
			}
		}
		if len(keys) > 0 {
			m.bg.Go(func() { m.renewBatch(h, keys, es) })
		}
		r.mu.Unlock()
	}
}

// renewKept extends one kept key, for the lease or what is left to its
// deadline; during a migration its copy on migrate_from too
// (redlock.RenewHold). Not held any more (released elsewhere,
// overwritten, deleted, expired, ended through a peer, or its copy on
// migrate_from gone), or its deadline within the lease: it is forgotten.
// No quorum, or no answer from migrate_from: it is tried again at the
// next tick, while the lease lasts.
//
// Without the record (before StartHolds, which the daemon runs before it
// serves: unit tests) it is renewed by ExtendKeys or Expire, which
// migrate_from gets as any extend (its yes needed) or plain PEXPIRE.
func (m *Manager) renewKept(key string, e *kept) {
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	lease := m.keepTTL
	last := false
	if !e.Deadline.IsZero() {
		if left := e.Deadline.Sub(m.now()); left <= lease {
			lease, last = left, true
		}
	}
	// While backends are quarantined, copy the key to those that came
	// back empty, and keep the copies alive node by node: a hold does not
	// expire, so the quarantine alone does not protect it (redlock.Repair,
	// which writes the field back with the key).
	h := m.holds.Load()
	if h != nil && lease > 0 {
		m.reg.mu.Lock()
		again := e.unrecorded
		m.reg.mu.Unlock()
		if again { // the renewal renews only where its field is
			m.record(key, e)
		}
		m.repair(ctx, h, e.recordOf(key), lease)
	}
	var err error
	switch {
	case lease <= 0:
		err = redlock.ErrNotHeld // its deadline passed: it expired by itself
	case h != nil:
		err = m.locker.RenewHold(ctx, h.Service, e.recordOf(key), lease)
	case e.AnyValue:
		var ok bool
		if ok, err = m.locker.Expire(ctx, key, lease); err == nil && !ok {
			err = redlock.ErrNotHeld
		}
	default:
		_, err = m.locker.ExtendKeys(ctx, []string{key}, e.Value, lease, redlock.Replace)
	}
	m.renewed(key, e, err, last, lease)
}

// renewed applies the outcome err of one renewal of key (kept as e, its
// renewal begun with startRenewal) for lease, its last one when last.
func (m *Manager) renewed(key string, e *kept, err error, last bool, lease time.Duration) {
	r := &m.reg
	r.mu.Lock()
	e.busy = false
	close(e.renewed)
	current := r.keys[key].kept == e
	drop := false
	var onOld *migrate.Error
	switch {
	case !current:
		// Unkept while it was renewed: the unkeep waited for this renewal
		// before it ended the hold, and a renewal writes no field back.
	case err == nil && last:
		r.setKept(key, nil) // it expires at its deadline by itself
	case err == nil:
		e.due = m.now().Add(m.keepTTL / 3)
	case errors.As(err, &onOld) && errors.Is(err, redlock.ErrNotHeld):
		// Its copy on migrate_from is gone: a client that has not moved
		// may hold the key there now. The backends' field still holds (it
		// may have been renewed there): end it, or a round would renew it.
		r.setKept(key, nil)
		drop = true
		m.log.Warn("held key gone on migrate_from: no longer kept", "key", key, "error", err)
	case errors.Is(err, redlock.ErrNotHeld):
		r.setKept(key, nil)
		m.log.Debug("key without expiry no longer holds its value: not renewed", "key", key)
	default:
		m.log.Warn("renewal of a key without expiry failed: retrying", "key", key, "error", err)
	}
	r.mu.Unlock()
	if drop {
		m.unrecord(key, e)
	}
}

// repair copies the hold r to the backends that came back empty
// (redlock.Repair: no I/O while none is quarantined).
func (m *Manager) repair(ctx context.Context, h *Holds, r record.Field, lease time.Duration) {
	switch _, err := m.locker.Repair(ctx, h.Service, r, lease); {
	case errors.Is(err, redlock.ErrNotHeld):
		m.log.Debug("held key not found on a voting backend: nothing to repair from", "key", r.Key)
	case err != nil:
		m.log.Warn("repair of a held key failed: retrying", "key", r.Key, "error", err)
	}
}

// renewPage is at most how many holds one renewal call renews on each
// backend.
const renewPage = 100

// renewBatch renews keys (kept as es, their renewals begun), all with a
// full lease and recorded, in one call per backend (redlock.RenewHolds).
func (m *Manager) renewBatch(h *Holds, keys []string, es []*kept) {
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	hs := make([]record.Field, len(keys))
	for i, key := range keys {
		hs[i] = es[i].recordOf(key)
		m.repair(ctx, h, hs[i], m.keepTTL)
	}
	errs := m.locker.RenewHolds(ctx, h.Service, hs, m.keepTTL)
	for i, key := range keys {
		m.renewed(key, es[i], errs[i], false, m.keepTTL)
	}
}

// unixMs is t in Unix milliseconds; 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
