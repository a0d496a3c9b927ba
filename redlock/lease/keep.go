package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Writes without expiry (SET k v NX, SETNX, a plain SET, GETSET, PERSIST):
// on one Redis the key stays until it is deleted. Through the proxy it is
// written with a lease of Options.KeepTTL and kept: renewed, with a
// compare-and-expire, while it still holds the value written, until it is
// released, overwritten, deleted or given an expiry. A holder that works
// longer than KeepTTL keeps its lock, as on one Redis; if this proxy
// stops, the key expires KeepTTL later (the safe side: a lock that nobody
// renews does not outlive its proxy).
//
// One goroutine, started on the first keep and ended when nothing is kept,
// renews what is due every KeepTTL/6, so a key is renewed between a third
// and a half of its lease in.

// kept is one key renewed here.
type kept struct {
	value string
	due   time.Time // next renewal
	busy  bool      // a renewal is in flight
}

// keeper is the set of kept keys and its renewal loop.
type keeper struct {
	mu      sync.Mutex
	keys    map[string]*kept
	running bool // the loop runs
}

// keep renews key while it holds value (see above); it replaces what was
// kept for key. Call it after a write without expiry of value to key
// succeeded. Without a KeepTTL it does nothing: such writes then carry no
// expiry at all.
func (m *Manager) keep(key, value string) {
	if m.keepTTL <= 0 {
		return
	}
	k := &m.keeper
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = make(map[string]*kept)
	}
	k.keys[key] = &kept{value: value, due: m.now().Add(m.keepTTL / 3)}
	if !k.running && !m.closing.Load() {
		k.running = true
		m.bg.Go(m.keepLoop)
	}
}

// unkeep stops renewing key: it was overwritten, deleted or given an
// expiry through this proxy.
func (m *Manager) unkeep(key string) {
	m.keeper.mu.Lock()
	delete(m.keeper.keys, key)
	m.keeper.mu.Unlock()
}

// unkeepValue stops renewing key if it is kept holding value (a release
// of that token, or an extend that gave it an expiry).
func (m *Manager) unkeepValue(key, value string) {
	m.keeper.mu.Lock()
	if k := m.keeper.keys[key]; k != nil && k.value == value {
		delete(m.keeper.keys, key)
	}
	m.keeper.mu.Unlock()
}

// unkeepAll stops renewing every key (FLUSHDB).
func (m *Manager) unkeepAll() {
	m.keeper.mu.Lock()
	clear(m.keeper.keys)
	m.keeper.mu.Unlock()
}

// Kept reports whether key is renewed here while it holds value: to a
// client it is a key without expiry (PTTL -1).
func (m *Manager) Kept(key, value string) bool {
	m.keeper.mu.Lock()
	defer m.keeper.mu.Unlock()
	k := m.keeper.keys[key]
	return k != nil && k.value == value
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
		k := &m.keeper
		k.mu.Lock()
		if len(k.keys) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		now := m.now()
		for key, e := range k.keys {
			if e.busy || now.Before(e.due) {
				continue
			}
			e.busy = true
			m.bg.Go(func() { m.renewKept(key, e) })
		}
		k.mu.Unlock()
	}
}

// renewKept extends one kept key. Not held any more (released elsewhere,
// overwritten, deleted, expired): it is forgotten. No quorum: it is tried
// again at the next tick, while the lease lasts.
func (m *Manager) renewKept(key string, e *kept) {
	ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
	defer cancel()
	_, err := m.locker.ExtendKeys(ctx, []string{key}, e.value, m.keepTTL, redlock.Replace)
	k := &m.keeper
	k.mu.Lock()
	defer k.mu.Unlock()
	e.busy = false
	switch {
	case err == nil:
		e.due = m.now().Add(m.keepTTL / 3)
	case errors.Is(err, redlock.ErrNotHeld):
		if k.keys[key] == e {
			delete(k.keys, key)
		}
		m.log.Debug("key without expiry no longer holds its value: not renewed", "key", key)
	default:
		m.log.Warn("renewal of a key without expiry failed: retrying", "key", key, "error", err)
	}
}
