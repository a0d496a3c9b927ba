package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// SESSION locks (LockRequest.Session) live as long as their Owner: one owned
// goroutine per lock extends it every third of its ttl, until MaxHold; the
// lock is released when the owner closes or the Manager shuts down. A
// renewal that fails (no quorum, or no longer held) loses the lock, and
// the owner hears of it through OwnerHooks.Lost.

// Owner is one holder of locks: a client connection. Its methods are safe
// for concurrent use.
type Owner struct {
	id    int64
	hooks OwnerHooks

	done      chan struct{} // closed by Close
	closeOnce sync.Once

	mu       sync.Mutex
	sessions map[*heldLock]struct{} // SESSION locks being renewed
	ended    bool                   // closed: no new sessions
}

// OwnerHooks are how the Manager reaches an owner's connection. Any may
// be nil.
type OwnerHooks struct {
	// Name is the owner's name for Snapshot (CLIENT SETNAME).
	Name func() string
	// Lost tells the owner that its SESSION lock on key was lost, and why.
	Lost func(key, reason string)
}

// NewOwner returns an owner; id identifies it in Snapshot.
func NewOwner(id int64, hooks OwnerHooks) *Owner {
	return &Owner{id: id, hooks: hooks, done: make(chan struct{})}
}

// Close marks the owner gone: a WAIT of its gives up. It is O(1) and safe
// to call more than once; Manager.CloseOwner also releases its SESSION
// locks.
func (o *Owner) Close() { o.closeOnce.Do(func() { close(o.done) }) }

// Done is closed once the owner is gone.
func (o *Owner) Done() <-chan struct{} { return o.done }

func (o *Owner) gone() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

func (o *Owner) name() string {
	if o.hooks.Name == nil {
		return ""
	}
	return o.hooks.Name()
}

func (o *Owner) lost(key, why string) {
	if o.hooks.Lost != nil {
		o.hooks.Lost(key, why)
	}
}

// addSession records l among the owner's session locks; false when the
// owner has already closed (the caller then releases l).
func (o *Owner) addSession(l *heldLock) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return false
	}
	if o.sessions == nil {
		o.sessions = make(map[*heldLock]struct{})
	}
	o.sessions[l] = struct{}{}
	return true
}

func (o *Owner) dropSession(l *heldLock) {
	o.mu.Lock()
	delete(o.sessions, l)
	o.mu.Unlock()
}

// endSessions marks the owner closed and returns its session locks.
func (o *Owner) endSessions() []*heldLock {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	out := make([]*heldLock, 0, len(o.sessions))
	for l := range o.sessions {
		out = append(out, l)
	}
	o.sessions = nil
	return out
}

// CloseOwner closes o and releases its SESSION locks in the background.
// It only starts work: proxy calls it under its server lock.
func (m *Manager) CloseOwner(o *Owner) {
	o.Close()
	for _, l := range o.endSessions() {
		m.bg.Go(func() { m.endSession(l) })
	}
}

// startSession begins renewing l, registered with its stop function set,
// for as long as its owner lives.
func (m *Manager) startSession(ctx context.Context, l *heldLock) {
	if m.closing.Load() || !l.owner.addSession(l) {
		m.bg.Go(func() { m.endSession(l) })
		return
	}
	m.bg.Go(func() { m.renew(ctx, l) })
}

// renew extends l every third of its ttl until it is stopped, MaxHold
// passes, or an extend fails.
func (m *Manager) renew(ctx context.Context, l *heldLock) {
	key := l.keys[0]
	holdUntil := l.granted.Add(m.maxHold)
	t := time.NewTimer(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m.maxHold > 0 && !m.now().Before(holdUntil) {
			_, expires, _ := m.reg.state(l)
			m.log.Info("session lock reached max_hold: no longer renewed", "key", key,
				"client-id", l.owner.id, "max-hold", m.maxHold)
			t.Reset(max(expires.Sub(m.now()), 0))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			m.sessionLost(l, "max_hold reached")
			return
		}
		_, err := m.Extend(ctx, l.keys, l.token, l.ttl, redlock.Replace)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			t.Reset(l.ttl / 3)
			continue
		}
		why := "renewal did not reach a quorum"
		if errors.Is(err, redlock.ErrNotHeld) {
			why = "renewal found it no longer held"
		}
		m.log.Warn("session lock lost", "key", key, "client-id", l.owner.id, "error", err)
		m.sessionLost(l, why)
		return
	}
}

// sessionLost forgets l, tells its owner, and deletes what may be left of
// it on the backends so that the next holder need not wait for its ttl.
func (m *Manager) sessionLost(l *heldLock, why string) {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	key := l.keys[0]
	l.owner.dropSession(l)
	l.owner.lost(key, why)
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = m.locker.Release(ctx, key, l.token)
	m.reg.remove(l)
}

// endSession stops renewing l and releases it.
func (m *Manager) endSession(l *heldLock) {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	if l.stop != nil {
		l.stop()
	}
	key := l.keys[0]
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	switch err := m.locker.Release(ctx, key, l.token); {
	case err == nil:
		m.stats.released.Add(1)
		m.log.Debug("session lock released", "key", key, "client-id", l.owner.id)
	case errors.Is(err, redlock.ErrNotHeld):
		m.log.Debug("session lock had expired", "key", key, "client-id", l.owner.id)
	default:
		m.log.Warn("session lock release failed", "key", key, "client-id", l.owner.id, "error", err)
	}
	m.reg.remove(l)
}

// releasing ends the renewal of a SESSION lock about to be released with
// its token, whatever releases it (Release, ReleaseKeys: UNLOCK, DELIFEQ,
// DELEX, a transaction, a library's script), before the release is sent,
// so that its owner is not told later that the lock it released was lost.
func (m *Manager) releasing(key, token string) {
	h := m.reg.byToken(key, token)
	if h == nil || !h.session || !h.released.CompareAndSwap(false, true) {
		return
	}
	if h.stop != nil {
		h.stop()
	}
	h.owner.dropSession(h)
}
