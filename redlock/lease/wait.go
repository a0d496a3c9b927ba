package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// LockRequest.Wait (LOCK … WAIT): waiters for one key on this proxy queue
// first come, first served, and only the head of the queue tries to
// acquire. While the key is held through this proxy the head sleeps until
// it is released (UNLOCK, MUNLOCK, a SESSION ending) or its ttl ends, and
// is woken at once; with Options.WatchReleases, once it has waited
// heldWatchDelay, it also subscribes to the key's release notices, so a
// release of that lock through another proxy wakes it at once. While it
// is held by someone this proxy does not know (another proxy, a legacy
// client) the head retries with jittered back-off, each sleep bounded by
// the holder's remaining ttl as a quorum read reports it; with
// Options.WatchReleases, the first time it finds the key held so, it also
// subscribes to the key's release notices (until the queue empties), and
// a release through another proxy wakes it at once. A waiter whose
// connection closes leaves the queue.

const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = 200 * time.Millisecond
	// localPoll bounds a head waiter's sleep while the key is held through
	// this proxy, in case it is released behind the proxy's back.
	localPoll = time.Second
)

// acquireWaiting acquires req.keys, waiting up to req.wait in the key's
// queue. grant runs on success while the waiter still heads the queue, so
// that the next waiter finds the new holder registered.
func (m *Manager) acquireWaiting(ctx context.Context, owner *Owner, req request, grant func(redlock.Lock, time.Time)) error {
	if req.wait <= 0 {
		for _, k := range req.keys {
			if m.reg.waiting(k) > 0 {
				return ErrQueued
			}
		}
		l, start, err := m.acquireOnce(ctx, req)
		if err == nil {
			grant(l, start)
		}
		return err
	}
	select {
	case <-m.stopWaits:
		return ErrStopped
	default:
	}
	key := req.keys[0]
	deadline := time.NewTimer(req.wait)
	defer deadline.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var retryC <-chan time.Time

	w := m.reg.enqueue(key)
	defer func() {
		if stop := m.reg.leave(key, w); stop != nil {
			stop()
		}
	}()
	backoff := minBackoff
	for {
		select {
		case <-w.wake:
		default:
			select {
			case <-w.wake:
			case <-retryC:
			case <-deadline.C:
				return ErrWaitOver
			case <-owner.Done():
				return ErrOwnerGone
			case <-m.stopWaits:
				return ErrStopped
			case <-ctx.Done():
				return fmt.Errorf("wait: %w", ctx.Err())
			}
		}
		retry.Stop()
		retryC = nil
		if !m.reg.isHead(key, w) {
			continue
		}
		if h := m.reg.lookup(key); h != nil {
			// Held through this proxy: sleep until its release here, its
			// release through another proxy (the notice, watchHeldHere),
			// or its expiry.
			m.watchHeldHere(key)
			_, expires, _ := m.reg.state(h)
			retry.Reset(min(max(expires.Sub(m.now()), 0)+time.Millisecond, localPoll))
			retryC = retry.C
			continue
		}
		l, start, err := m.acquireOnce(ctx, req)
		if err == nil {
			grant(l, start)
			return nil
		}
		if !errors.Is(err, redlock.ErrHeld) {
			return err
		}
		if m.watchReleases(ctx, key) {
			// Subscribed just now: a release before that went unheard.
			w.signal()
			continue
		}
		retry.Reset(m.backoff(ctx, key, backoff))
		retryC = retry.C
		backoff = min(2*backoff, maxBackoff)
	}
}

// watchReleases subscribes to key's release notices for as long as key
// has waiters here, unless it is watched already; it reports whether it
// subscribed now.
func (m *Manager) watchReleases(ctx context.Context, key string) bool {
	if m.watch == nil {
		return false
	}
	e := m.reg.startWatch(key)
	if e == nil {
		return false
	}
	m.subscribe(ctx, key, e)
	return true
}

// heldWatchDelay is how long the head of a key held through this proxy
// waits before it subscribes to the key's release notices: most waits end
// sooner, by a release here, and pay for no subscription.
const heldWatchDelay = 10 * time.Millisecond

// watchHeldHere watches key's release notices for the head of a key held
// through this proxy, in the background: after heldWatchDelay, if the key
// still has waiters, it subscribes, then reads the key once from the
// backends, so that a release through another proxy before the
// subscription was in place is found too (the record is then dropped and
// the head woken, as a notice would).
func (m *Manager) watchHeldHere(key string) {
	if m.watch == nil {
		return
	}
	e := m.reg.startWatch(key)
	if e == nil {
		return
	}
	m.bg.Go(func() {
		t := time.NewTimer(heldWatchDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-m.life.Done():
		}
		if !m.reg.watching(key, e) {
			return // the waiters left: never subscribed
		}
		m.subscribe(m.life, key, e)
		h := m.reg.lookup(key)
		if h == nil {
			return
		}
		ctx, cancel := context.WithTimeout(m.life, releaseTimeout)
		defer cancel()
		if v, err := m.locker.Get(ctx, key); err == nil && (!v.Exists || v.Data != h.token) {
			m.reg.releasedElsewhere(key, redlock.TokenTag(h.token))
		}
	})
}

// subscribe subscribes e, which startWatch returned, to key's notices.
func (m *Manager) subscribe(ctx context.Context, key string, e *watchEntry) {
	stop := m.watch(ctx, key, func(tag string) { m.notice(key, tag) }, func() { m.reg.wake(key) })
	if !m.reg.setWatch(key, e, stop) {
		stop() // the last waiter left meanwhile
	}
}

// backoff is a jittered sleep around b, cut short by the remaining ttl of
// the key's holder when a quorum read can tell it.
func (m *Manager) backoff(ctx context.Context, key string, b time.Duration) time.Duration {
	sleep := b/2 + rand.N(b)
	v, err := m.locker.Read(ctx, key)
	switch {
	case err != nil:
	case !v.Exists:
		sleep = time.Millisecond // already gone: try again at once
	case v.PTTL >= 0:
		sleep = min(sleep, v.PTTL+time.Millisecond)
	}
	return sleep
}
