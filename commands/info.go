package commands

import (
	"context"
	"time"
)

// LOCKINFO and LOCKS: what is held, read from the lease Manager.

// LOCKINFO key: a map of the lock's state (docs/commands.md), null when
// the key is free; never the token.
func (d *Dispatcher) lockinfo(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	info, ok, err := d.leases.Info(ctx, string(args[1]), c.owner)
	switch {
	case err != nil:
		return d.lockError(err)
	case !ok:
		return nullNotHeld
	}
	var fence Reply = Null{}
	if info.Fenced {
		fence = Int(info.Fence)
	}
	return Map{
		{"validity-ms", pttlMs(info.Validity)},
		{"ttl-ms", pttlMs(info.TTL)},
		{"nodes-holding", Int(info.NodesHolding)},
		{"nodes", Int(info.Nodes)},
		{"fence", fence},
		{"held-by-this-connection", boolInt(info.Mine)},
		{"session", boolInt(info.Session)},
		{"waiters", Int(info.Waiters)},
	}
}

// LOCKS: a map per lock granted through this proxy and not yet released
// or expired (docs/commands.md); never the tokens.
func (d *Dispatcher) locks(ctx context.Context, c *Client, args [][]byte) Reply {
	held := d.leases.Snapshot()
	out := make(Array, len(held))
	for i, h := range held {
		var fence Reply = Null{}
		if h.Fenced {
			fence = Int(h.Fence)
		}
		out[i] = Map{
			{"keys", Strings(h.Keys...)},
			{"client-id", Int(h.OwnerID)},
			{"client-name", BulkString(h.OwnerName)},
			{"age-ms", Int(h.Age.Milliseconds())},
			{"validity-ms", Int(h.Validity.Milliseconds())},
			{"ttl-ms", Int(h.TTL.Milliseconds())},
			{"session", boolInt(h.Session)},
			{"fence", fence},
		}
	}
	return out
}

// pttlMs is a remaining ttl in ms; redlock.PTTLNoExpiry (-1) and
// redlock.PTTLAbsent (-2) stay as they are, as PTTL answers them.
func pttlMs(d time.Duration) Int {
	if d < 0 {
		return Int(d)
	}
	return Int(d.Milliseconds())
}
