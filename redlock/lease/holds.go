package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// The holds record (docs/safety.md, "Holds"): what this proxy keeps
// (keep.go) is also a field of one hash per tier service on the backends,
// written to a quorum before the write is answered (by the write's own
// call where it can), so that any proxy of the tier can renew it. A
// field names no owner. The proxy that made a hold renews it from its
// memory while it lives, before half its lease is gone; every renewRound
// each proxy reads the record and renews the holds whose maker stopped
// (was killed, restarted): the one the key falls to among the live
// members (rendezvous) once the lease on a quorum fell below a half, and
// anyone once it fell below a third (the member it falls to may be gone
// before the views show it). Rounds come every sixth of a lease, so a
// hold is found with a sixth of its lease left at least. A renewal compares the value
// and the copy on each backend and changes nothing else, so two proxies
// renewing one hold do no harm, and nothing is handed over.

// Holds configures the record (StartHolds).
type Holds struct {
	// Service names the record: record.Key(Service) on every
	// backend, shared by the proxies of one tier service.
	Service string
	// ID is this proxy's member id, as Live names it.
	ID string
	// Live returns the ids of the tier's live members: a hold whose lease
	// fell below half is renewed by the one its key falls to (below a
	// third, by anyone).
	Live func() []string
}

// StartHolds records every hold from now on in the record h describes,
// and takes part in the renewal rounds until Shutdown: it runs the first
// round before it returns (what a former self left is renewed at once if
// it runs low, and fields of keys that expired while no proxy ran are
// deleted). Call it once, before the first client is served, after the
// tier's first heartbeat (Live must know the live members). Without a
// KeepTTL it does nothing.
func (m *Manager) StartHolds(h Holds) {
	if m.keepTTL <= 0 || h.ID == "" || h.Live == nil || !m.holds.CompareAndSwap(nil, &h) {
		return
	}
	m.renewRound(&h)
	m.bg.Go(m.roundLoop)
}

// record writes e, the hold of key, to the record where the key holds
// its value (this proxy has just written the key). A failure is logged
// and marks e unrecorded: its renewal records it first (a renewal renews
// only where the field is).
func (m *Manager) record(key string, e *kept) {
	h := m.holds.Load()
	if h == nil || e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	err := m.locker.SetHold(ctx, h.Service, e.recordOf(key))
	m.reg.mu.Lock()
	e.unrecorded = err != nil
	m.reg.mu.Unlock()
	if err != nil {
		m.log.Warn("hold not recorded on a quorum: its renewal records it", "key", key, "error", err)
	}
}

// unrecord ends key's hold of e's value in the record before a write
// through this proxy gives that value an expiry (or the hold's migrate_from
// copy is gone): no renewal may undo it. A hold whose key no longer holds
// its value needs none of this: the next script that reads its field
// drops it.
func (m *Manager) unrecord(key string, e *kept) {
	h := m.holds.Load()
	if h == nil || e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	if err := m.locker.EndHold(ctx, h.Service, key, e.digest); err != nil {
		m.log.Warn("hold not ended in the record", "key", key, "error", err)
	}
}

// endRecorded ends the hold of key in the record, made through another
// proxy, when the last round saw one (of value's digest, unless value is
// nil): a write through this proxy is about to give that value an
// expiry, and no renewal must undo it.
func (m *Manager) endRecorded(key string, value *string) {
	h := m.holds.Load()
	if h == nil {
		return
	}
	r := m.reg.get(key).recorded
	if r == nil || value != nil && r.Digest != record.AnyDigest && r.Digest != digestOf(*value) {
		return
	}
	// The record seen may be stale (a round ago): the backends check
	// that the key still holds the value.
	digest := ""
	if value != nil {
		digest = digestOf(*value)
	}
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	if err := m.locker.EndHold(ctx, h.Service, key, digest); err != nil {
		m.log.Warn("hold of another proxy not ended in the record", "key", key, "error", err)
	}
}

// ErrMaxHolds refuses a lock that would make the tier hold more than
// Options.MaxHolds keys without expiry or beyond MaxTTL.
var ErrMaxHolds = errors.New("max_holds reached: the tier holds as many locks without expiry or beyond max_ttl as it may")

// TierHoldCount is how many holds the tier has, as max_holds counts them:
// the fields of the record a quorum showed at the last renewal round, and
// the holds this proxy made since (without the record: this proxy's
// holds). O(1): it is asked on every new hold.
func (m *Manager) TierHoldCount() int {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	return m.tierHoldsLocked()
}

// tierHoldsLocked is TierHoldCount with the registry's lock held.
func (m *Manager) tierHoldsLocked() int {
	if m.holds.Load() == nil {
		return m.reg.nKept
	}
	return m.reg.nRecorded + m.reg.made
}

// holdsFull reports whether a new hold of key would pass MaxHolds, and
// counts the refusal. A key already held is no new hold. The count is a
// renewal round old (at most KeepTTL/6) for what other proxies made: the
// bound may be passed by what the tier's proxies hold at once within
// that.
func (m *Manager) holdsFull(key string) bool {
	if m.maxHolds <= 0 || m.keepTTL <= 0 {
		return false
	}
	m.reg.mu.Lock()
	s := m.reg.keys[key]
	full := s.kept == nil && s.recorded == nil && m.tierHoldsLocked() >= m.maxHolds
	m.reg.mu.Unlock()
	if !full {
		return false
	}
	m.stats.holdsRefused.Add(1)
	return true
}

// roundEvery is how often the record is read: KeepTTL/6, so that a hold
// whose lease fell below KeepTTL/3 (renewed by anyone) has at least a sixth of
// KeepTTL left when it is renewed. Each round reads every field on every backend (about
// four commands a field): once a second, as it was, 20,000 holds through
// two proxies asked five backends for some 800,000 commands a second,
// more than they serve (docs/benchmarks.md, "Data and holds under lock
// load").
func (m *Manager) roundEvery() time.Duration {
	return max(m.keepTTL/6, time.Millisecond)
}

// roundLoop runs renewRound until Shutdown.
func (m *Manager) roundLoop() {
	t := time.NewTicker(m.roundEvery())
	defer t.Stop()
	for {
		select {
		case <-m.stopWaits:
			return
		case <-t.C:
		}
		m.renewRound(m.holds.Load())
	}
}

// renewRound reads the record once and renews, a page at a time, the
// holds not made here whose key's lease on a quorum fell below a half of
// what a renewal gives, when the key falls to this proxy among the live
// members, or below a third whoever it falls to. A live maker renews
// before half its lease is gone (keepLoop), so these are rarely renewed
// twice, and a twice-renewed hold is no harm.
func (m *Manager) renewRound(h *Holds) {
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	scanned, err := m.locker.ScanHolds(ctx, h.Service)
	if err != nil {
		m.log.Debug("holds record not read", "error", err)
		return
	}
	m.reg.setRecorded(scanned)
	live := append([]string{h.ID}, h.Live()...)
	var due []record.Field
	for _, s := range scanned {
		if m.keeps(s.Key) || !m.leaseBelow(s, 2) || !m.leaseBelow(s, 3) && fallsTo(s.Key, live) != h.ID {
			continue // renewed here from memory, not due, or another's
		}
		due = append(due, s.Field)
	}
	renewed := 0
	for len(due) > 0 && !m.closing.Load() {
		page := due[:min(len(due), renewPage)]
		due = due[len(page):]
		for _, r := range page {
			m.repair(ctx, h, r, m.keepTTL)
		}
		for i, err := range m.locker.RenewHolds(ctx, h.Service, page, m.keepTTL) {
			if err != nil {
				m.log.Debug("hold of the tier not renewed", "key", page[i].Key, "error", err)
				continue
			}
			renewed++
		}
	}
	// Holds whose maker is gone are renewed by the rounds for as long as
	// they last: said at most once a minute, not at every round.
	switch now := m.now(); {
	case renewed == 0:
	case now.Sub(m.toldRenewing) >= time.Minute:
		m.toldRenewing = now
		m.log.Info("renewed holds made through other proxies", "count", renewed)
		m.locker.Events().Add(redlock.EventHoldsRenewedHere, h.ID, fmt.Sprintf("%d holds renewed here, their maker silent", renewed))
	default:
		m.log.Debug("renewed holds made through other proxies", "count", renewed)
	}
}

// leaseBelow reports whether s's lease on a quorum fell below 1/part of what
// a renewal gives (min(KeepTTL, time left to its deadline)).
func (m *Manager) leaseBelow(s record.Scanned, part int64) bool {
	if s.Lease < 0 {
		return false // no expiry: nothing runs out
	}
	full := m.keepTTL
	if s.Deadline != 0 {
		full = min(full, time.UnixMilli(s.Deadline).Sub(m.now()))
	}
	return time.Duration(part)*s.Lease < full
}

// fallsTo is the member of ids that key falls to: the highest hash of
// member and key (rendezvous hashing), so that members that see the same
// ids agree, and a member leaving moves only its own keys.
func fallsTo(key string, ids []string) string {
	best, top := "", uint64(0)
	for _, id := range ids {
		f := fnv.New64a()
		f.Write([]byte(id))
		f.Write([]byte{0})
		f.Write([]byte(key))
		if h := f.Sum64(); best == "" || h > top || h == top && id < best {
			best, top = id, h
		}
	}
	return best
}
