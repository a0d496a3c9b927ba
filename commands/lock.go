package commands

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// lockStats counts lock operations by outcome, for INFO.
type lockStats struct {
	acquired, contended, noQuorum atomic.Int64
	released, notHeld             atomic.Int64
	extended, extendFailed        atomic.Int64
}

// lockRequest is a parsed LOCK command.
type lockRequest struct {
	key   string
	ttl   time.Duration
	wait  time.Duration
	token string
	fence bool
}

// LOCK key ttl-ms [WAIT ms] [TOKEN token] [FENCE] [SESSION]
func (d *Dispatcher) lock(ctx context.Context, c *Client, args [][]byte) Reply {
	req, errReply := d.parseLock(args)
	if errReply != nil {
		return errReply
	}
	if req.token == "" {
		tok, err := redlock.NewToken()
		if err != nil {
			d.log.Error("token generation failed", "error", err)
			return errInternal
		}
		req.token = tok
	}
	l, err := d.acquireWaiting(ctx, req)
	switch {
	case err == nil:
		d.stats.acquired.Add(1)
		var fence Reply = Null{}
		if req.fence {
			fence = Int(l.Fence)
		}
		return Array{BulkString(l.Token), Int(l.Validity.Milliseconds()), fence}
	case errors.Is(err, redlock.ErrHeld):
		d.stats.contended.Add(1)
		return NullArray{}
	case errors.Is(err, redlock.ErrNoQuorum):
		d.stats.noQuorum.Add(1)
	}
	return d.lockError(err)
}

func (d *Dispatcher) parseLock(args [][]byte) (lockRequest, Reply) {
	var req lockRequest
	if r := d.checkKey(args[1]); r != nil {
		return req, r
	}
	req.key = string(args[1])
	ttl, r := d.parseTTL(args[2])
	if r != nil {
		return req, r
	}
	req.ttl = ttl
	for i := 3; i < len(args); i++ {
		switch option(args[i]) {
		case "WAIT":
			if i+1 >= len(args) {
				return req, errSyntax
			}
			ms, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			if err != nil || ms < 0 {
				return req, errNotInteger
			}
			req.wait = min(time.Duration(ms)*time.Millisecond, d.opts.MaxWait)
			i++
		case "TOKEN":
			if i+1 >= len(args) {
				return req, errSyntax
			}
			if len(args[i+1]) == 0 {
				return req, Error("ERR TOKEN must not be empty")
			}
			if len(args[i+1]) > d.opts.MaxValueBytes {
				return req, Errorf(errValueTooLong, d.opts.MaxValueBytes)
			}
			req.token = string(args[i+1])
			i++
		case "FENCE":
			req.fence = true
		case "SESSION":
			return req, Error("ERR SESSION is not supported yet")
		default:
			return req, errSyntax
		}
	}
	return req, nil
}

// acquireWaiting tries once, then, while WAIT time remains and the lock is
// held by another owner, retries after a jittered back-off.
func (d *Dispatcher) acquireWaiting(ctx context.Context, req lockRequest) (redlock.Lock, error) {
	deadline := d.now().Add(req.wait)
	backoff := 5 * time.Millisecond
	for {
		acquire := d.locker.Acquire
		if req.fence {
			acquire = d.locker.AcquireFenced
		}
		l, err := acquire(ctx, req.key, req.token, req.ttl)
		if !errors.Is(err, redlock.ErrHeld) {
			return l, err
		}
		left := deadline.Sub(d.now())
		if left <= 0 {
			return l, err
		}
		sleep := min(backoff/2+rand.N(backoff), left)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return l, err
		case <-t.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// UNLOCK key token
func (d *Dispatcher) unlock(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	return d.release(ctx, string(args[1]), string(args[2]))
}

// release answers 1 when the lock was released on a quorum, 0 when it was
// not held by token.
func (d *Dispatcher) release(ctx context.Context, key, token string) Reply {
	err := d.locker.Release(ctx, key, token)
	switch {
	case err == nil:
		d.stats.released.Add(1)
		return Int(1)
	case errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrInvalid):
		d.stats.notHeld.Add(1)
		return Int(0)
	}
	return d.lockError(err)
}

// EXTEND key token ttl-ms
func (d *Dispatcher) extend(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	ttl, r := d.parseTTL(args[3])
	if r != nil {
		return r
	}
	return d.extendToken(ctx, string(args[1]), string(args[2]), ttl)
}

// extendToken answers the new validity in ms, or null when not held.
func (d *Dispatcher) extendToken(ctx context.Context, key, token string, ttl time.Duration) Reply {
	validity, err := d.locker.Extend(ctx, key, token, ttl)
	switch {
	case err == nil:
		d.stats.extended.Add(1)
		return Int(validity.Milliseconds())
	case errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrInvalid):
		d.stats.extendFailed.Add(1)
		return Null{}
	}
	return d.lockError(err)
}

func (d *Dispatcher) checkKey(key []byte) Reply {
	if len(key) > d.opts.MaxKeyBytes {
		return Errorf(errKeyTooLong, d.opts.MaxKeyBytes)
	}
	if string(key) == redlock.FenceKey {
		return errReservedKey
	}
	return nil
}

// parseTTL reads a ttl in milliseconds and checks [min_ttl, max_ttl].
func (d *Dispatcher) parseTTL(b []byte) (time.Duration, Reply) {
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, errNotInteger
	}
	lo, hi := d.opts.MinTTL.Milliseconds(), d.opts.MaxTTL.Milliseconds()
	if ms < lo || ms > hi {
		return 0, Errorf(errTTLRange, ms, lo, hi)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
