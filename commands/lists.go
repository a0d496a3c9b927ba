package commands

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// Lists as wake-up signals (python-redis-lock waits with BLPOP on a list
// its release pushes onto). A push goes to every voting backend, so each
// holds a copy of the signal; a blocking pop takes the first element any
// backend pops and consumes the copies the others popped with it
// (relay/pop.go says how, and why a copy left behind costs a waiter one
// extra lock attempt, never safety). Lists are not quorum data: the
// replies are the most useful reading of the backends' answers, written
// next to each command.

// LPUSH key element [element ...] / RPUSH: on every voting backend; OK
// once a quorum acknowledged, and the reply is the longest list's length.
func (d *Dispatcher) push(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	cmd := []any{strings.ToUpper(string(args[0])), string(args[1])}
	for _, a := range args[2:] {
		if r := d.checkValue(a); r != nil {
			return r
		}
		cmd = append(cmd, string(a))
	}
	ns, r := d.listInts(ctx, "push", cmd)
	if r != nil {
		return r
	}
	return Int(slices.Max(ns))
}

// LLEN key: the length that a quorum of backends holds at least.
func (d *Dispatcher) llen(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	ns, r := d.listInts(ctx, "llen", []any{"LLEN", string(args[1])})
	if r != nil {
		return r
	}
	slices.Sort(ns)
	return Int(ns[len(ns)-d.locker.Quorum()])
}

// listInts sends cmd to every voting backend and returns the integer
// replies, or the reply to give when fewer than a quorum answered (a
// backend's own error, WRONGTYPE for one, when it is what they said).
func (d *Dispatcher) listInts(ctx context.Context, op string, cmd []any) ([]int64, Reply) {
	replies, err := d.locker.DoAll(ctx, op, cmd...)
	if err != nil {
		return nil, d.lockError(err)
	}
	var ns []int64
	var said Reply
	for _, nr := range replies {
		if n, ok := nr.Value.(int64); ok && nr.Err == nil {
			ns = append(ns, n)
		} else if said == nil {
			said = backendError(nr.Err)
		}
	}
	if q := d.locker.Quorum(); len(ns) < q {
		if said != nil {
			return nil, said
		}
		return nil, Errorf("NOQUORUM only %d of %d backends answered, need %d", len(ns), len(replies), q)
	}
	return ns, nil
}

// backendError is a backend's error reply that a client may see
// (WRONGTYPE), or nil for anything else (those are logged, not sent).
func backendError(err error) Reply {
	var re interface{ RedisError() }
	if err != nil && errors.As(err, &re) && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return Error(err.Error())
	}
	return nil
}

// LPOP key / RPOP key: on every voting backend; the element that most
// backends popped (ties: the first backend's), nil when none popped. Any
// other element a backend popped is pushed back where it was.
func (d *Dispatcher) pop(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	v, ok, r := d.popAll(ctx, string(args[1]), strings.EqualFold(string(args[0]), "RPOP"))
	if r != nil {
		return r
	}
	if !ok {
		return Null{}
	}
	return BulkString(v)
}

// popAll pops one element of key on every voting backend (from the tail
// when right), as LPOP/RPOP answer.
func (d *Dispatcher) popAll(ctx context.Context, key string, right bool) (string, bool, Reply) {
	cmd, back := "LPOP", "LPUSH"
	if right {
		cmd, back = "RPOP", "RPUSH"
	}
	replies, err := d.locker.DoAll(ctx, "pop", cmd, key)
	if err != nil {
		return "", false, d.lockError(err)
	}
	votes := map[string]int{}
	best, answered := "", 0
	var said Reply
	for _, nr := range replies {
		if nr.Err != nil {
			if said == nil {
				said = backendError(nr.Err)
			}
			continue
		}
		answered++
		if s, ok := nr.Value.(string); ok {
			votes[s]++
			if votes[s] > votes[best] {
				best = s
			}
		}
	}
	if answered == 0 {
		if said != nil {
			return "", false, said
		}
		return "", false, Error("NOQUORUM no backend answered")
	}
	nodes := d.locker.Nodes()
	for i, nr := range replies {
		if s, ok := nr.Value.(string); ok && nr.Err == nil && s != best {
			if _, err := nodes[i].Do(context.WithoutCancel(ctx), back, key, s); err != nil {
				d.log.Warn("could not push back a popped element", "node", nr.Addr, "key", key, "error", err)
			}
		}
	}
	return best, len(votes) > 0, nil
}

// LMOVE source destination LEFT|RIGHT LEFT|RIGHT: LPOP/RPOP of source as
// above, then the element pushed on destination on every voting backend.
func (d *Dispatcher) lmove(ctx context.Context, c *Client, args [][]byte) Reply {
	from, to, r := d.moveArgs(args)
	if r != nil {
		return r
	}
	v, ok, r := d.popAll(ctx, string(args[1]), from)
	if r != nil || !ok {
		return orNull(r)
	}
	return d.moved(ctx, string(args[2]), v, to)
}

// moveArgs checks LMOVE's and BLMOVE's keys and reads their directions
// (true: RIGHT).
func (d *Dispatcher) moveArgs(args [][]byte) (from, to bool, r Reply) {
	if r := d.checkKey(args[1]); r != nil {
		return false, false, r
	}
	if r := d.checkKey(args[2]); r != nil {
		return false, false, r
	}
	dirs := [2]bool{}
	for i, a := range args[3:5] {
		switch strings.ToUpper(string(a)) {
		case "LEFT":
		case "RIGHT":
			dirs[i] = true
		default:
			return false, false, errSyntax
		}
	}
	return dirs[0], dirs[1], nil
}

// moved pushes a moved element onto destination and answers it.
func (d *Dispatcher) moved(ctx context.Context, dst, v string, right bool) Reply {
	cmd := "LPUSH"
	if right {
		cmd = "RPUSH"
	}
	if _, r := d.listInts(ctx, "push", []any{cmd, dst, v}); r != nil {
		return r
	}
	return BulkString(v)
}

func orNull(r Reply) Reply {
	if r == nil {
		return Null{}
	}
	return r
}

// BLPOP key [key ...] timeout / BRPOP: blocks on every backend; the first
// element popped, as [key, element], or nil when the timeout passed.
func (d *Dispatcher) bpop(ctx context.Context, c *Client, args [][]byte) Reply {
	timeout, r := parseTimeout(args[len(args)-1])
	if r != nil {
		return r
	}
	keys, r := d.keyList(args[1 : len(args)-1])
	if r != nil {
		return r
	}
	p, ok, r := d.blockingPop(ctx, c, relay.PopRequest{Keys: keys, Right: strings.EqualFold(string(args[0]), "BRPOP"), Timeout: timeout})
	if r != nil {
		return r
	}
	if !ok {
		return NullArray{}
	}
	return Array{BulkString(p.Key), BulkString(p.Value)}
}

// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout: a blocking
// pop of source, then the element pushed on destination on every voting
// backend (not atomic: the element is in the proxy between the two).
func (d *Dispatcher) blmove(ctx context.Context, c *Client, args [][]byte) Reply {
	from, to, r := d.moveArgs(args)
	if r != nil {
		return r
	}
	timeout, r := parseTimeout(args[5])
	if r != nil {
		return r
	}
	p, ok, r := d.blockingPop(ctx, c, relay.PopRequest{Keys: []string{string(args[1])}, Right: from, Timeout: timeout})
	if r != nil {
		return r
	}
	if !ok {
		return Null{}
	}
	return d.moved(ctx, string(args[2]), p.Value, to)
}

// blockingPop runs a relay pop that ends when the client leaves.
func (d *Dispatcher) blockingPop(ctx context.Context, c *Client, req relay.PopRequest) (relay.Popped, bool, Reply) {
	req.Cancel = c.Done()
	p, ok, err := d.relay.Pop(ctx, req)
	switch {
	case err == nil:
		return p, ok, nil
	case errors.Is(err, relay.ErrTooFewBackends):
		return p, false, Error("NOQUORUM " + err.Error())
	case errors.Is(err, relay.ErrClosed):
		return p, false, errShuttingDown
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return p, false, errCancelled
	}
	var se relay.ServerError
	if errors.As(err, &se) && strings.HasPrefix(string(se), "WRONGTYPE") {
		return p, false, Error(se)
	}
	d.log.Warn("blocking pop failed", "error", err)
	return p, false, d.lockError(redlock.ErrNoQuorum)
}

// parseTimeout reads a blocking command's timeout in seconds, as Redis.
func parseTimeout(b []byte) (time.Duration, Reply) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f*1e9 > math.MaxInt64 {
		return 0, Error("ERR timeout is not a float or out of range")
	}
	if f < 0 {
		return 0, Error("ERR timeout is negative")
	}
	return time.Duration(f * float64(time.Second)), nil
}
