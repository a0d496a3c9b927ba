package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// The holds record (docs/safety.md, "Holds"): what this proxy keeps
// (keep.go) is also a field of one hash per tier service on the backends,
// written to a quorum before the write is answered, so that any proxy of
// the tier can renew it. The owner named in a field renews it; every
// claimRound each proxy reads the record and takes over the fields whose
// owner handed them over (HandOverHolds, on SIGTERM), let the key's
// lease run below a third (a kill -9, before the tier notices), or is not
// a live member of the tier and let it run below a half (it missed a
// renewal: a member the view does not show yet is not claimed from).

// Holds configures the record (StartHolds).
type Holds struct {
	// Service names the record: redlock.HoldsKey(Service) on every
	// backend, shared by the proxies of one tier service.
	Service string
	// ID is this proxy's member id: the owner of the holds it makes and
	// takes over. It must not contain spaces.
	ID string
	// Live returns the ids of the tier's live members; a hold of any other
	// owner is taken over once it missed a renewal.
	Live func() []string
}

// StartHolds records every hold from now on in the record h describes,
// and takes part in the claims, until HandOverHolds or Shutdown: it runs
// the first claim round before it returns (what a former self left is
// resumed at once, and fields of keys that expired while no proxy ran are
// deleted). Call it once, before the first client is served, after the
// tier's first heartbeat (Live must know the live members). Without a
// KeepTTL it does nothing.
func (m *Manager) StartHolds(h Holds) {
	if m.keepTTL <= 0 || h.ID == "" || h.Live == nil || !m.holds.CompareAndSwap(nil, &h) {
		return
	}
	m.claimRound(&h)
	m.bg.Go(m.claimLoop)
}

// holder is the owner this proxy writes into fields: its id, handed over
// (redlock.HandedOver and its id) once it handed its holds over.
func (m *Manager) holder(h *Holds) string {
	if m.handedOver.Load() {
		return redlock.HandedOver + h.ID
	}
	return h.ID
}

// record writes e, the hold of key, to the record (whatever the field
// held: this proxy has just written the key). A failure is logged and
// marks e unrecorded: its renewal records it first (a renewal renews
// only where the field is).
func (m *Manager) record(key string, e *kept) {
	h := m.holds.Load()
	if h == nil || e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	err := m.locker.SetHold(ctx, h.Service, redlock.Hold{
		Key: key, Owner: m.holder(h), Deadline: unixMs(e.Deadline), Digest: e.digest,
	}, "")
	m.keeper.mu.Lock()
	e.unrecorded = err != nil
	m.keeper.mu.Unlock()
	if err != nil {
		m.log.Warn("hold not recorded on a quorum: its renewal records it", "key", key, "error", err)
	}
}

// unrecord deletes key's field from the record where this proxy owns it.
func (m *Manager) unrecord(key string) {
	h := m.holds.Load()
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	err := m.locker.DropHold(ctx, h.Service, key, m.holder(h))
	if errors.Is(err, redlock.ErrNotHeld) {
		// Another proxy took it over before it heard of the end (it
		// claimed from this one while its view of the tier lagged): end it
		// for whoever owns it, so that its renewal does not undo the end.
		err = m.locker.EndHold(ctx, h.Service, key, "")
	}
	if err != nil {
		m.log.Warn("hold not dropped from the record", "key", key, "error", err)
	}
}

// endRecorded ends the hold of key in the record whoever owns it, when
// the last claim round saw one (of value's digest, unless value is nil):
// a write through this proxy is about to give that value an expiry, and
// the owner's renewal must not undo it.
func (m *Manager) endRecorded(key string, value *string) {
	h := m.holds.Load()
	if h == nil {
		return
	}
	m.keeper.mu.Lock()
	r, ok := m.keeper.recorded[key]
	m.keeper.mu.Unlock()
	if d := r.Digest; !ok || value != nil && d != redlock.AnyDigest && d != digestOf(*value) {
		return
	}
	// The record seen may be stale (a claim round ago): the backends
	// check that the key still holds the value.
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
// the fields of the record a quorum showed at the last claim round, and
// the holds this proxy made since (without the record: this proxy's
// holds). O(1): it is asked on every new hold.
func (m *Manager) TierHoldCount() int {
	m.keeper.mu.Lock()
	defer m.keeper.mu.Unlock()
	return m.tierHoldsLocked()
}

// tierHoldsLocked is TierHoldCount with the keeper's lock held.
func (m *Manager) tierHoldsLocked() int {
	if m.holds.Load() == nil {
		return len(m.keeper.keys)
	}
	return len(m.keeper.recorded) + m.keeper.made
}

// holdsFull reports whether a new hold of key would pass MaxHolds, and
// counts the refusal. A key already held is no new hold. The count is a
// claim round old (at most KeepTTL/6) for what other proxies made: the
// bound may be passed by what the tier's proxies hold at once within
// that.
func (m *Manager) holdsFull(key string) bool {
	if m.maxHolds <= 0 || m.keepTTL <= 0 {
		return false
	}
	k := &m.keeper
	k.mu.Lock()
	_, mine := k.keys[key]
	_, seen := k.recorded[key]
	full := !mine && !seen && m.tierHoldsLocked() >= m.maxHolds
	k.mu.Unlock()
	if !full {
		return false
	}
	m.stats.holdsRefused.Add(1)
	return true
}

// HandOverHolds gives every hold of this proxy to the tier: their fields
// name no owner any more, so that a live peer takes them over at its next
// claim round, and nothing is renewed here after. A hold made after it is
// recorded as handed over. Call it on shutdown, before leaving the tier.
// It returns how many holds it handed over.
func (m *Manager) HandOverHolds(ctx context.Context) (int, error) {
	h := m.holds.Load()
	if h == nil {
		return 0, nil
	}
	m.keeper.mu.Lock()
	m.handedOver.Store(true)
	m.keeper.mu.Unlock()
	n, err := m.locker.HandOverHolds(ctx, h.Service, h.ID)
	if err != nil {
		m.log.Warn("holds not handed over: the tier takes them over when their lease runs low", "error", err)
		return n, err
	}
	m.log.Info("handed over holds", "count", n)
	return n, nil
}

// claimEvery is how often the record is read: KeepTTL/6, so that a hold
// found late (below KeepTTL/3) has at least a sixth of KeepTTL left when
// it is claimed. Each round reads every field on every backend (about
// four commands a field): once a second, as it was, 20,000 holds through
// two proxies asked five backends for some 800,000 commands a second,
// more than they serve (docs/benchmarks.md, "Data and holds under lock
// load").
func (m *Manager) claimEvery() time.Duration {
	return max(m.keepTTL/6, time.Millisecond)
}

// claimLoop runs claimRound until HandOverHolds or Shutdown.
func (m *Manager) claimLoop() {
	t := time.NewTicker(m.claimEvery())
	defer t.Stop()
	for {
		select {
		case <-m.stopWaits:
			return
		case <-t.C:
		}
		if m.handedOver.Load() {
			return
		}
		m.claimRound(m.holds.Load())
	}
}

// claimRound reads the record once and takes over what is due: a hold a
// quorum records whose owner handed it over, is not live, or whose key's
// lease on a quorum fell below a third of what a renewal gives. A field
// of this proxy that it no longer keeps is dropped. Each claim is a
// compare-and-set of the owner it saw, then a renewal at once.
func (m *Manager) claimRound(h *Holds) {
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	scanned, err := m.locker.ScanHolds(ctx, h.Service)
	if err != nil {
		m.log.Debug("holds record not read", "error", err)
		return
	}
	recorded := make(map[string]redlock.Hold, len(scanned))
	for _, s := range scanned {
		if s.Owner != redlock.Ended {
			recorded[s.Key] = s.Hold
		}
	}
	m.keeper.mu.Lock()
	m.keeper.recorded = recorded
	m.keeper.made = 0
	m.keeper.mu.Unlock()
	live := map[string]bool{h.ID: true}
	for _, id := range h.Live() {
		live[id] = true
	}
	took := map[string]int{}
	for _, s := range scanned {
		if m.handedOver.Load() || m.closing.Load() {
			break // shutting down: the claims are the tier's
		}
		if s.Owner == redlock.Ended || m.keeps(s.Key) {
			continue // ended, or renewed here
		}
		if s.Owner == h.ID {
			m.unrecord(s.Key) // given up here, dropped on too few nodes
			continue
		}
		_, handed := strings.CutPrefix(s.Owner, redlock.HandedOver)
		// An owner not (yet) in this proxy's view of the tier (a peer that
		// just started, a view that lags) is claimed from only once it
		// missed its renewal: its lease fell below a half, which a live
		// owner's renewal, due between a third and a half in, never lets
		// happen; a live one's below a third.
		if !handed && !m.late(s, 3) && (live[s.Owner] || !m.late(s, 2)) {
			continue
		}
		claim := s.Hold
		claim.Owner = h.ID
		if err := m.locker.ClaimHold(ctx, h.Service, claim, s.Owner); err != nil {
			m.log.Debug("hold not claimed", "key", s.Key, "from", s.Owner, "error", err)
			continue
		}
		if m.adopt(s.Hold) {
			took[s.Owner]++
		}
	}
	for owner, n := range took {
		from, handed := strings.CutPrefix(owner, redlock.HandedOver)
		m.log.Info("took over holds", "from", from, "handed-over", handed, "count", n)
		m.locker.Events().Add(redlock.EventHoldsTakenOver, from, fmt.Sprintf("%d holds, handed over: %t", n, handed))
	}
}

// late reports whether s's lease on a quorum fell below 1/part of what
// its owner's renewal gives (min(KeepTTL, time left to its deadline)).
func (m *Manager) late(s redlock.ScannedHold, part int64) bool {
	if s.Lease < 0 {
		return false // no expiry: nothing runs out
	}
	full := m.keepTTL
	if s.Deadline != 0 {
		full = min(full, time.UnixMilli(s.Deadline).Sub(m.now()))
	}
	return time.Duration(part)*s.Lease < full
}

// adopt keeps a hold claimed from the record, and renews it at once. It
// reports false when the Manager handed over or shut down meanwhile.
func (m *Manager) adopt(r redlock.Hold) bool {
	e := &kept{Hold: Hold{AnyValue: r.Digest == redlock.AnyDigest}, digest: r.Digest}
	e.startRenewal()
	if r.Deadline != 0 {
		e.Deadline = time.UnixMilli(r.Deadline)
	}
	k := &m.keeper
	k.mu.Lock()
	defer k.mu.Unlock()
	if m.handedOver.Load() || m.closing.Load() || k.keys[r.Key] != nil {
		return false
	}
	if k.keys == nil {
		k.keys = make(map[string]*kept)
	}
	k.keys[r.Key] = e
	if !k.running {
		k.running = true
		m.bg.Go(m.keepLoop)
	}
	m.bg.Go(func() { m.renewKept(r.Key, e) })
	return true
}
