package commands

import (
	"context"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Sorted-set commands outside scripts: ZREM (redis-semaphore's release)
// and ZCARD run as a script that only calls them would, by vote on every
// voting backend under the key's gate (redlock.Vote, docs/compatibility.md).
// A backend that misses a write is left behind, as by a vote; the next
// vote outvotes it.

// zScripts run each command by vote; pcall hands a command error (such as
// WRONGTYPE) back as the reply, as Redis answers it.
var zScripts = map[string]*script.Script{
	"ZREM":  script.New("return redis.pcall('ZREM', KEYS[1], unpack(ARGV))"),
	"ZCARD": script.New("return redis.pcall('ZCARD', KEYS[1])"),
}

// ZREM key member [member ...]
func (d *Dispatcher) zrem(ctx context.Context, c *Client, args [][]byte) Reply {
	return d.zvote(ctx, "ZREM", args, true)
}

// ZCARD key
func (d *Dispatcher) zcard(ctx context.Context, c *Client, args [][]byte) Reply {
	return d.zvote(ctx, "ZCARD", args, false)
}

// zvote runs the sorted-set command name (args as sent: name, key,
// arguments) on every backend by vote.
func (d *Dispatcher) zvote(ctx context.Context, name string, args [][]byte, writes bool) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	argv, r := argStrings(args[2:], d.checkValue)
	if r != nil {
		return r
	}
	keys := []string{string(args[1])}
	var v any
	var err error
	if writes { // data: ZREM leaves the key's expiry as it was (lease.VoteData); a release wakes the key's waiters
		v, err = d.leases.VoteData(ctx, zScripts[name], keys, argv)
	} else {
		v, err = d.leases.Vote(ctx, zScripts[name], keys, argv, false)
	}
	if err != nil {
		return d.lockError(err)
	}
	return scriptReply(backendReply(v), ResultNotHeld)
}
