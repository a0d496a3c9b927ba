package commands

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// LOCKINFO, LOCKS (what is held) and MLOCK, MUNLOCK (several keys at once).

// defaultNodeTimeout bounds LOCKINFO's per-backend reads when
// Options.NodeTimeout is not set.
const defaultNodeTimeout = 50 * time.Millisecond

// LOCKINFO key
//
// A map: validity-ms (what is left of the validity this proxy granted or
// last extended; for a lock this proxy did not grant, the remaining ttl on
// the backends), ttl-ms, nodes-holding (backends holding the quorum's
// value), nodes, fence (when granted here with FENCE, else null),
// held-by-this-connection, session, waiters (queued here). Null when the
// key is free. The token is never shown.
func (d *Dispatcher) lockinfo(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	key := string(args[1])
	v, err := d.locker.Read(ctx, key)
	if err != nil {
		return d.lockError(err)
	}
	if !v.Exists {
		return Null{}
	}
	holding, nodes := d.nodesHolding(ctx, key, v.Data)
	now := d.now()
	ttl := v.PTTL
	validity := ttl
	var fence Reply = Null{}
	mine, session := false, false
	if h := d.reg.byToken(key, v.Data); h != nil {
		deadline, _, _ := d.reg.state(h)
		validity = max(deadline.Sub(now), 0)
		if h.fenced {
			fence = Int(h.fence)
		}
		mine, session = h.client == c, h.session
	}
	ttlMs, validityMs := Int(ttl.Milliseconds()), Int(validity.Milliseconds())
	if ttl == redlock.PTTLNoExpiry {
		ttlMs, validityMs = -1, -1 // a legacy write without expiry
	}
	return Map{
		{"validity-ms", validityMs},
		{"ttl-ms", ttlMs},
		{"nodes-holding", Int(holding)},
		{"nodes", Int(nodes)},
		{"fence", fence},
		{"held-by-this-connection", boolInt(mine)},
		{"session", boolInt(session)},
		{"waiters", Int(d.reg.waiting(key))},
	}
}

// nodesHolding asks every backend, in parallel and each within the node
// timeout, whether key holds value there.
func (d *Dispatcher) nodesHolding(ctx context.Context, key, value string) (holding, total int) {
	nodes := d.locker.Nodes()
	timeout := d.opts.NodeTimeout
	if timeout <= 0 {
		timeout = defaultNodeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := make(chan bool, len(nodes))
	for _, n := range nodes {
		go func() {
			v, err := n.Do(ctx, "GET", key)
			s, _ := v.(string)
			got <- err == nil && s == value
		}()
	}
	for range nodes {
		if <-got {
			holding++
		}
	}
	return holding, len(nodes)
}

// LOCKS
//
// The locks granted through this proxy and not yet released or expired,
// by key: an array of maps with keys, client-id, client-name, age-ms,
// validity-ms, ttl-ms (the ttl asked for), session, fence. Tokens are
// never shown.
func (d *Dispatcher) locks(ctx context.Context, c *Client, args [][]byte) Reply {
	now := d.now()
	ls := d.reg.snapshot()
	out := make(Array, 0, len(ls))
	for _, h := range ls {
		deadline, _, gone := d.reg.state(h)
		if gone {
			continue
		}
		var fence Reply = Null{}
		if h.fenced {
			fence = Int(h.fence)
		}
		out = append(out, Map{
			{"keys", Strings(h.keys...)},
			{"client-id", Int(h.client.ID)},
			{"client-name", BulkString(h.client.Name())},
			{"age-ms", Int(now.Sub(h.granted).Milliseconds())},
			{"validity-ms", Int(max(deadline.Sub(now), 0).Milliseconds())},
			{"ttl-ms", Int(h.ttl.Milliseconds())},
			{"session", boolInt(h.session)},
			{"fence", fence},
		})
	}
	return out
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
	keys := make([]string, 0, len(args)-2)
	for _, a := range args[2:] {
		if r := d.checkKey(a); r != nil {
			return r
		}
		if k := string(a); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if d.reg.waiting(k) > 0 {
			d.stats.contended.Add(1)
			return NullArray{} // waiters queued here go first
		}
	}
	token, err := redlock.NewToken()
	if err != nil {
		d.log.Error("token generation failed", "error", err)
		return errInternal
	}
	start := d.now()
	l, err := d.locker.AcquireKeys(ctx, keys, token, ttl, redlock.IfAbsent)
	switch {
	case err == nil:
		d.stats.acquired.Add(1)
		if len(l.Keys) == 0 {
			l.Keys = keys
		}
		d.granted(c, l, ttl, start, false, false)
		return Array{BulkString(l.Token), Int(l.Validity.Milliseconds()), Null{}}
	case errors.Is(err, redlock.ErrHeld):
		d.stats.contended.Add(1)
		return NullArray{}
	case errors.Is(err, redlock.ErrNoQuorum):
		d.stats.noQuorum.Add(1)
	}
	return d.lockError(err)
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
	states, err := d.locker.ReleaseKeys(ctx, keys, token)
	if err != nil {
		if errors.Is(err, redlock.ErrInvalid) {
			return Int(0)
		}
		return d.lockError(err)
	}
	n := 0
	for i, s := range states {
		if s == redlock.Released && !slices.Contains(keys[:i], keys[i]) {
			n++
			d.reg.released(keys[i], token)
		}
	}
	if n > 0 {
		d.stats.released.Add(1)
	} else {
		d.stats.notHeld.Add(1)
	}
	return Int(n)
}
