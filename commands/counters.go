package commands

import (
	"context"
	"errors"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Counters outside scripts. simple-redis-mutex takes its fencing token
// from INCR of one shared key after it acquires; a counter must then
// answer more than every value it answered before, whichever backends
// missed a call. redlock.Incr makes it grow across the backends (the
// largest copy among a quorum, written back to a quorum). Only increments
// are served: DECR and a negative INCRBY would break that rule, and are
// refused with a reason. Inside scripts INCR runs by vote, as before.

const errIncrDown = Error("ERR redlock-proxy counters only grow: the increment must be at least 1 (DECR, DECRBY and INCRBY with a negative increment are not supported)")

// INCR key
func (d *Dispatcher) incr(ctx context.Context, c *Client, args [][]byte) Reply {
	return d.count(ctx, args[1], 1)
}

// INCRBY key increment: the increment read as Redis reads it (no '+',
// no leading zero).
func (d *Dispatcher) incrby(ctx context.Context, c *Client, args [][]byte) Reply {
	by, err := lua.ParseInt(string(args[2]))
	if err != nil {
		return errNotInteger
	}
	if by < 1 {
		return errIncrDown
	}
	return d.count(ctx, args[1], by)
}

// DECR key, DECRBY key decrement: refused, after DECRBY's decrement is
// read as Redis reads it (a word is Redis's error, not the refusal).
func (d *Dispatcher) decr(ctx context.Context, c *Client, args [][]byte) Reply {
	if len(args) == 3 {
		if _, err := lua.ParseInt(string(args[2])); err != nil {
			return errNotInteger
		}
	}
	return errIncrDown
}

func (d *Dispatcher) count(ctx context.Context, key []byte, by int64) Reply {
	if r := d.checkKey(key); r != nil {
		return r
	}
	v, err := d.leases.Incr(ctx, string(key), by)
	var re redlock.RedisError
	switch {
	case errors.As(err, &re):
		return Error(re)
	case err != nil:
		return d.lockError(err)
	}
	return countReply(v)
}
