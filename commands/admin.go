package commands

import (
	"context"
	"strings"
)

// LOCKADMIN: what an operator needs of a lock service beyond a client's
// own locks. The row is Admin: only users with admin = true reach it.

// LOCKADMIN RELEASE key | WHO key | HOLDS | HELP
//
// Replies as docs/commands.md lists them. RELEASE deletes key whatever its
// token, as its holder would release it (waiters woken, a SESSION stops
// renewing, a hold stops being kept), and is logged (warn, "lock
// force-released") with the user and address. HOLDS lists the holds made
// here and the other proxies' as the holds record showed them at the last
// round (within default_ttl/6).
func (d *Dispatcher) lockadmin(ctx context.Context, c *Client, args [][]byte) Reply {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case (sub == "RELEASE" || sub == "WHO") && len(args) != 3:
		return Errorf(errWrongArity, "lockadmin|"+strings.ToLower(sub))
	case (sub == "HOLDS" || sub == "HELP") && len(args) != 2:
		return Errorf(errWrongArity, "lockadmin|"+strings.ToLower(sub))
	}
	switch sub {
	case "RELEASE":
		if r := d.checkKey(args[2]); r != nil {
			return r
		}
		by := c.User() + "@" + c.Addr
		ok, err := d.leases.ForceRelease(ctx, string(args[2]), by)
		if err != nil {
			return d.lockError(err)
		}
		return boolInt(ok)
	case "WHO":
		if r := d.checkKey(args[2]); r != nil {
			return r
		}
		return d.lockWho(ctx, string(args[2]))
	case "HELP":
		return Strings(
			"LOCKADMIN RELEASE key: release key whatever its token (1 released, 0 free)",
			"LOCKADMIN WHO key: who holds key (null when free)",
			"LOCKADMIN HOLDS: the tier's holds (keys kept beyond max_ttl or without expiry)")
	case "HOLDS":
		holds := d.leases.Holds()
		out := make(Array, len(holds))
		for i, h := range holds {
			deadline := Int(-1)
			if !h.Deadline.IsZero() {
				deadline = Int(h.Deadline.UnixMilli())
			}
			out[i] = Map{
				{"key", BulkString(h.Key)},
				{"renewed-here", boolInt(h.Here)},
				{"deadline-ms", deadline},
			}
		}
		return out
	}
	return Errorf(errUnknownSubcmd, args[1], "LOCKADMIN")
}

// lockWho is LOCKADMIN WHO key.
func (d *Dispatcher) lockWho(ctx context.Context, key string) Reply {
	info, ok, err := d.leases.Info(ctx, key, nil)
	switch {
	case err != nil:
		return d.lockError(err)
	case !ok:
		return nullNotHeld
	}
	m := Map{
		{"ttl-ms", pttlMs(info.TTL)},
		{"nodes-holding", Int(info.NodesHolding)},
		{"nodes", Int(info.Nodes)},
		{"waiters", Int(info.Waiters)},
	}
	h, here := d.leases.HeldBy(key)
	m = append(m, KV{"held-here", boolInt(here)})
	if here {
		m = append(m,
			KV{"client-id", Int(h.OwnerID)},
			KV{"client-name", BulkString(h.OwnerName)},
			KV{"age-ms", Int(h.Age.Milliseconds())},
			KV{"session", boolInt(h.Session)})
	}
	for _, e := range d.leases.Holds() {
		if e.Key == key {
			m = append(m,
				KV{"hold", Int(1)},
				KV{"renewed-here", boolInt(e.Here)})
			return m
		}
	}
	return append(m, KV{"hold", Int(0)})
}
