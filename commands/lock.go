package commands

import (
	"context"
	"errors"
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
	key     string
	ttl     time.Duration
	wait    time.Duration
	token   string
	fence   bool
	session bool
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
	var (
		l    redlock.Lock
		held *heldLock
	)
	err := d.acquireWaiting(ctx, c, req, func(got redlock.Lock, start time.Time) {
		l = got
		held = d.granted(c, got, req.ttl, start, req.session, req.fence)
	})
	switch {
	case err == nil && c.gone() && !req.session:
		// The connection closed while the lock was being taken: nobody
		// will read the token, so give it back now.
		d.bg.Go(func() { d.releaseHeld(held) })
		return NullArray{}
	case err == nil:
		d.stats.acquired.Add(1)
		var fence Reply = Null{}
		if req.fence {
			fence = Int(l.Fence)
		}
		return Array{BulkString(l.Token), Int(l.Validity.Milliseconds()), fence}
	case errors.Is(err, redlock.ErrHeld), errors.Is(err, errClientGone):
		d.stats.contended.Add(1)
		return NullArray{}
	case errors.Is(err, errStopped):
		return errShuttingDown
	case errors.Is(err, redlock.ErrNoQuorum):
		d.stats.noQuorum.Add(1)
	}
	return d.lockError(err)
}

// granted records a lock granted to c (and starts its renewal when it is a
// SESSION lock).
func (d *Dispatcher) granted(c *Client, l redlock.Lock, ttl time.Duration, start time.Time, session, fenced bool) *heldLock {
	now := d.now()
	h := &heldLock{
		keys:     l.Keys,
		token:    l.Token,
		fenced:   fenced,
		ttl:      ttl,
		granted:  now,
		client:   c,
		session:  session,
		deadline: now.Add(l.Validity),
		expires:  start.Add(ttl),
	}
	if fenced {
		h.fence = l.Fence
	}
	var sctx context.Context
	if session {
		sctx = d.newSession(h)
	}
	d.reg.add(h, now)
	if session {
		d.startSession(sctx, h)
	}
	return h
}

// releaseHeld releases a lock in the background work of the dispatcher.
func (d *Dispatcher) releaseHeld(h *heldLock) {
	ctx, cancel := context.WithTimeout(context.Background(), sessionReleaseTimeout)
	defer cancel()
	if _, err := d.locker.ReleaseKeys(ctx, h.keys, h.token); err != nil {
		d.log.Debug("release after a closed connection failed", "keys", h.keys, "error", err)
	}
	d.reg.remove(h)
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
			if r := d.checkValue(args[i+1]); r != nil {
				return req, r
			}
			req.token = string(args[i+1])
			i++
		case "FENCE":
			req.fence = true
		case "SESSION":
			req.session = true
		default:
			return req, errSyntax
		}
	}
	return req, nil
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
	d.releasing(key, token)
	err := d.locker.Release(ctx, key, token)
	switch {
	case err == nil:
		d.stats.released.Add(1)
		d.reg.released(key, token)
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
	start := d.now()
	validity, err := d.locker.Extend(ctx, key, token, ttl)
	switch {
	case err == nil:
		d.stats.extended.Add(1)
		d.reg.extended(key, token, start, d.now(), validity)
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
	return d.ttlIn(ms, time.Millisecond)
}
