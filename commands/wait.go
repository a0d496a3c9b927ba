package commands

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// LOCK … WAIT: waiters for one key on this proxy queue first come, first
// served, and only the head of the queue tries to acquire. While the key is
// held through this proxy the head sleeps until it is released (UNLOCK,
// MUNLOCK, a SESSION ending) or its ttl ends, and is woken at once. While
// it is held by someone this proxy does not know (another proxy, a legacy
// client) the head retries with jittered back-off, each sleep bounded by
// the holder's remaining ttl as a quorum read reports it. A waiter whose
// connection closes leaves the queue.

const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = 200 * time.Millisecond
	// localPoll bounds a head waiter's sleep while the key is held through
	// this proxy, in case it is released behind the proxy's back.
	localPoll = time.Second
)

var (
	// errWaitOver: WAIT ran out with the key still held.
	errWaitOver = fmt.Errorf("wait ran out: %w", redlock.ErrHeld)
	// errQueued: a LOCK without WAIT on a key that has waiters queued here
	// goes behind them, that is, it does not get the lock.
	errQueued = fmt.Errorf("waiters queued: %w", redlock.ErrHeld)
	// errClientGone: the waiter's connection closed.
	errClientGone = errors.New("client connection closed")
	// errStopped: the proxy is shutting down.
	errStopped = errors.New("shutting down")
)

// acquireOnce tries once; start is when the attempt began.
func (d *Dispatcher) acquireOnce(ctx context.Context, req lockRequest) (redlock.Lock, time.Time, error) {
	start := d.now()
	acquire := d.locker.Acquire
	if req.fence {
		acquire = d.locker.AcquireFenced
	}
	l, err := acquire(ctx, req.key, req.token, req.ttl)
	return l, start, err
}

// acquireWaiting acquires req.key, waiting up to req.wait in the key's
// queue. grant runs on success while the waiter still heads the queue, so
// that the next waiter finds the new holder registered.
func (d *Dispatcher) acquireWaiting(ctx context.Context, c *Client, req lockRequest, grant func(redlock.Lock, time.Time)) error {
	if req.wait <= 0 {
		if d.reg.waiting(req.key) > 0 {
			return errQueued
		}
		l, start, err := d.acquireOnce(ctx, req)
		if err == nil {
			grant(l, start)
		}
		return err
	}
	select {
	case <-d.stopWaits:
		return errStopped
	default:
	}
	deadline := time.NewTimer(req.wait)
	defer deadline.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var retryC <-chan time.Time

	w := d.reg.enqueue(req.key)
	defer d.reg.leave(req.key, w)
	var stopWatch func()
	defer func() {
		if stopWatch != nil {
			stopWatch()
		}
	}()
	backoff := minBackoff
	for {
		select {
		case <-w.wake:
		default:
			if stopWatch == nil {
				stopWatch = c.watchClose()
			}
			select {
			case <-w.wake:
			case <-retryC:
			case <-deadline.C:
				return errWaitOver
			case <-c.Done():
				return errClientGone
			case <-d.stopWaits:
				return errStopped
			case <-ctx.Done():
				return fmt.Errorf("wait: %w", ctx.Err())
			}
		}
		retry.Stop()
		retryC = nil
		if !d.reg.isHead(req.key, w) {
			continue
		}
		if h := d.reg.lookup(req.key); h != nil {
			// Held through this proxy: sleep until its release or expiry.
			_, expires, _ := d.reg.state(h)
			retry.Reset(min(max(expires.Sub(d.now()), 0)+time.Millisecond, localPoll))
			retryC = retry.C
			continue
		}
		l, start, err := d.acquireOnce(ctx, req)
		if err == nil {
			grant(l, start)
			return nil
		}
		if !errors.Is(err, redlock.ErrHeld) {
			return err
		}
		retry.Reset(d.backoff(ctx, req.key, backoff))
		retryC = retry.C
		backoff = min(2*backoff, maxBackoff)
	}
}

// backoff is a jittered sleep around b, cut short by the remaining ttl of
// the key's holder when a quorum read can tell it.
func (d *Dispatcher) backoff(ctx context.Context, key string, b time.Duration) time.Duration {
	sleep := b/2 + rand.N(b)
	v, err := d.locker.Read(ctx, key)
	switch {
	case err != nil:
	case !v.Exists:
		sleep = time.Millisecond // already gone: try again at once
	case v.PTTL >= 0:
		sleep = min(sleep, v.PTTL+time.Millisecond)
	}
	return sleep
}
