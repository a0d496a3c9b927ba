package commands

import (
	"context"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Sorted-set commands outside scripts. A semaphore keeps its holders in a
// sorted set: redis-semaphore's Semaphore and MultiSemaphore acquire and
// refresh by scripts (run by vote), and Semaphore releases with a bare
// ZREM. These commands run as a script that only calls them would: on
// every voting backend under the key's gate, the reply being what a quorum
// agreed on (redlock.Vote; its rules are docs/compatibility.md's). A
// write that a backend misses leaves that backend behind, as a vote does;
// the next vote outvotes it. Only these are served: ZREM (what libraries
// send) and ZCARD (to look at a holder set through the proxy); their
// replies are integers, the same in RESP2 and RESP3. Every other
// sorted-set command runs inside scripts only.

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
	argv := make([]string, len(args)-2)
	for i, a := range args[2:] {
		if r := d.checkValue(a); r != nil {
			return r
		}
		argv[i] = string(a)
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
