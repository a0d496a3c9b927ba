package commands

import (
	"context"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
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

// scoresRESP3 gives the scores in a sorted-set command's reply the types
// Redis 7 gives them in RESP3 (a script by vote receives them as bulk
// strings, and ranges WITHSCORES flat): a double for ZSCORE, ZINCRBY,
// ZADD … INCR and each of ZMSCORE's, a [member, double] pair per member
// for a range WITHSCORES and for ZPOPMIN/ZPOPMAX with a count, and
// [member, double] for ZPOPMIN/ZPOPMAX without one. Anything else
// (errors, nil, counts) is r as it was.
func scoresRESP3(args [][]byte, r Reply) Reply {
	name := strings.ToUpper(string(args[0]))
	switch name {
	case "ZSCORE", "ZINCRBY", "ZADD":
		if s, ok := r.(BulkString); ok {
			return Double(s)
		}
		return r
	case "ZRANK", "ZREVRANK": // WITHSCORE (Redis 7.2): [rank, score]
		if a, ok := r.(Array); ok && len(a) == 2 {
			return Array{a[0], asDouble(a[1])}
		}
		return r
	}
	a, ok := r.(Array)
	if !ok {
		return r
	}
	switch name {
	case "ZMSCORE":
		out := make(Array, len(a))
		for i, e := range a {
			out[i] = asDouble(e)
		}
		return out
	case "ZPOPMIN", "ZPOPMAX":
		if len(args) == 2 && len(a) == 2 {
			return Array{a[0], asDouble(a[1])}
		}
		return scorePairs(a)
	case "ZRANGE", "ZRANGEBYSCORE", "ZREVRANGE", "ZREVRANGEBYSCORE":
		if withScores(args[4:]) {
			return scorePairs(a)
		}
	case "ZUNION", "ZINTER", "ZDIFF": // numkeys key [key …] [options]
		n, err := lua.ParseInt(string(args[1]))
		if err == nil && n >= 0 && n <= int64(len(args)-2) && withScores(args[2+n:]) {
			return scorePairs(a)
		}
	}
	return r
}

// withScores reports whether options holds WITHSCORES.
func withScores(options [][]byte) bool {
	for _, o := range options {
		if strings.EqualFold(string(o), "WITHSCORES") {
			return true
		}
	}
	return false
}

// scorePairs turns a flat [member, score, …] into [member, double] pairs.
func scorePairs(a Array) Reply {
	if len(a)%2 != 0 {
		return a
	}
	out := make(Array, len(a)/2)
	for i := range out {
		out[i] = Array{a[2*i], asDouble(a[2*i+1])}
	}
	return out
}

// asDouble is a score's bulk string as a Double; nil stays nil.
func asDouble(r Reply) Reply {
	if s, ok := r.(BulkString); ok {
		return Double(s)
	}
	return r
}
