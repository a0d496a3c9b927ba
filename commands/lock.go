package commands

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
)

// The native lock commands: LOCK, UNLOCK, EXTEND, MLOCK, MUNLOCK. Each
// parses its arguments, calls the lease Manager, and turns the outcome
// into a reply: a lock held by another owner is a null reply (counted
// held), one not held by the token null or 0 (not_held), anything else
// goes through lockError.

// LOCK key ttl-ms [WAIT ms] [TOKEN token] [FENCE] [SESSION]
func (d *Dispatcher) lock(ctx context.Context, c *Client, args [][]byte) Reply {
	req, r := d.parseLock(args)
	if r != nil {
		return r
	}
	if req.Token == "" {
		if req.Token, r = d.newToken(); r != nil {
			return r
		}
	}
	g, err := d.leases.Acquire(ctx, c.owner, req)
	if err != nil {
		return d.refused(err)
	}
	var fence Reply = Null{}
	if req.Fence {
		fence = Int(g.Fence)
	}
	return Array{BulkString(g.Token), Int(g.Validity.Milliseconds()), fence}
}

// refused answers a failed native acquisition: null when another owner
// holds a key (or the caller left), else the error.
func (d *Dispatcher) refused(err error) Reply {
	switch {
	case errors.Is(err, redlock.ErrHeld), errors.Is(err, lease.ErrOwnerGone):
		return nullArrayHeld
	case errors.Is(err, lease.ErrStopped):
		return errShuttingDown
	}
	return d.lockError(err)
}

// newToken is a fresh random token.
func (d *Dispatcher) newToken() (string, Reply) {
	tok, err := redlock.NewToken()
	if err != nil {
		d.log.Error("token generation failed", "error", err)
		return "", errInternal
	}
	return tok, nil
}

func (d *Dispatcher) parseLock(args [][]byte) (lease.LockRequest, Reply) {
	var req lease.LockRequest
	if r := d.checkKey(args[1]); r != nil {
		return req, r
	}
	req.Keys = []string{string(args[1])}
	ttl, r := d.parseTTL(args[2])
	if r != nil {
		return req, r
	}
	req.TTL = ttl
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
			req.Wait = d.opts.MaxWait
			if ms < int64(d.opts.MaxWait/time.Millisecond) {
				req.Wait = time.Duration(ms) * time.Millisecond
			}
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
			req.Token = string(args[i+1])
			i++
		case "FENCE":
			req.Fence = true
		case "SESSION":
			req.Session = true
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
	switch err := d.leases.Release(ctx, key, token); {
	case err == nil:
		return Int(1)
	case errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrInvalid):
		return zeroNotHeld
	default:
		return d.lockError(err)
	}
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
	validity, err := d.leases.Extend(ctx, []string{key}, token, ttl, redlock.Replace)
	switch {
	case err == nil:
		return countReply(validity.Milliseconds())
	case errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrInvalid):
		return nullNotHeld
	default:
		return d.lockError(err)
	}
}

// MLOCK ttl-ms key [key ...]
//
// All keys or none: each backend grants every key or nothing (one script,
// atomic per backend), and the lock is granted when a quorum granted all of
// them. No partial holds remain: a failed attempt is rolled back on every
// backend. Within this proxy the keys are entered in sorted order, so two
// MLOCKs over overlapping keys cannot deadlock; across proxies nothing
// waits, so nothing can deadlock. Same reply as LOCK; no WAIT, no SESSION.
func (d *Dispatcher) mlock(ctx context.Context, c *Client, args [][]byte) Reply {
	ttl, r := d.parseTTL(args[1])
	if r != nil {
		return r
	}
	keys, r := d.keyList(args[2:])
	if r != nil {
		return r
	}
	req := lease.LockRequest{Keys: distinct(keys), TTL: ttl}
	if req.Token, r = d.newToken(); r != nil {
		return r
	}
	g, err := d.leases.Acquire(ctx, c.owner, req)
	if err != nil {
		return d.refused(err)
	}
	return Array{BulkString(g.Token), Int(g.Validity.Milliseconds()), Null{}}
}

// MUNLOCK token key [key ...]
//
// Releases the keys an MLOCK took with token; answers how many of them
// were held by token and released on a quorum.
func (d *Dispatcher) munlock(ctx context.Context, c *Client, args [][]byte) Reply {
	token := string(args[1])
	keys, r := d.keyList(args[2:])
	if r != nil {
		return r
	}
	states, err := d.leases.ReleaseKeys(ctx, distinct(keys), token)
	if err != nil {
		if errors.Is(err, redlock.ErrInvalid) {
			return zeroNotHeld
		}
		return d.lockError(err)
	}
	return countReply(int64(countReleased(states)))
}

// distinct is keys without repeats, in order.
func distinct(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// countReleased is how many keys a release released.
func countReleased(states []redlock.KeyState) int {
	n := 0
	for _, s := range states {
		if s == redlock.Released {
			n++
		}
	}
	return n
}

func (d *Dispatcher) checkKey(key []byte) Reply {
	if len(key) > d.opts.MaxKeyBytes {
		return Errorf(errKeyTooLong, d.opts.MaxKeyBytes)
	}
	if redlock.Reserved(string(key)) {
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
