package commands

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/relay"
)

// Lists as wake-up signals (python-redis-lock waits with BLPOP on a list
// its release pushes onto). Pushes and pops go to every voting backend
// through the lease Manager (lease/lists.go says how the answers are
// read); a blocking pop takes the first element any backend pops and
// consumes the copies the others popped with it (relay/pop.go says how,
// and why a copy left behind costs a waiter one extra lock attempt, never
// safety).

// LPUSH key element [element ...] / RPUSH: on every voting backend; OK
// once a quorum acknowledged, and the reply is the longest list's length.
func (d *Dispatcher) push(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	elems, r := argStrings(args[2:], d.checkValue)
	if r != nil {
		return r
	}
	n, err := d.leases.Push(ctx, string(args[1]), strings.EqualFold(string(args[0]), "RPUSH"), elems)
	if err != nil {
		return d.listError(err)
	}
	return Int(n)
}

// LLEN key: the length that a quorum of backends holds at least.
func (d *Dispatcher) llen(ctx context.Context, c *Client, args [][]byte) Reply {
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	n, err := d.leases.Len(ctx, string(args[1]))
	if err != nil {
		return d.listError(err)
	}
	return Int(n)
}

// listError maps a list operation's error: a backend's error reply
// (WRONGTYPE) as it said it, no backend answering as NOQUORUM, anything
// else through lockError.
func (d *Dispatcher) listError(err error) Reply {
	var re redlock.RedisError
	switch {
	case errors.As(err, &re):
		return Error(re)
	case errors.Is(err, lease.ErrNoBackend):
		return noQuorum("NOQUORUM no backend answered")
	}
	return d.lockError(err)
}

// LPOP key [count] / RPOP key [count]: on every voting backend. Without
// count, the element that most backends popped (ties: the first
// backend's), nil when none popped. With count, the elements most
// backends popped, in order (lease.PopCount), as an array: empty when
// count is 0, the null array when no backend holds key. Any other element
// a backend popped is pushed back where it was.
func (d *Dispatcher) pop(ctx context.Context, c *Client, args [][]byte) Reply {
	if len(args) > 3 {
		return Errorf(errWrongArity, strings.ToLower(string(args[0])))
	}
	if r := d.checkKey(args[1]); r != nil {
		return r
	}
	right := strings.EqualFold(string(args[0]), "RPOP")
	if len(args) == 3 {
		count, r := parseCount(args[2])
		if r != nil {
			return r
		}
		elems, exists, err := d.leases.PopCount(ctx, string(args[1]), right, count)
		switch {
		case err != nil:
			return d.listError(err)
		case !exists:
			return NullArray{}
		}
		a := make(Array, len(elems))
		for i, e := range elems {
			a[i] = BulkString(e)
		}
		return a
	}
	v, ok, err := d.leases.Pop(ctx, string(args[1]), right)
	switch {
	case err != nil:
		return d.listError(err)
	case !ok:
		return Null{}
	}
	return BulkString(v)
}

// parseCount reads LPOP's and RPOP's count as Redis 7 does: a whole
// number from 0 to 2^63-1 written the one way Redis writes it (no sign,
// no leading zero); anything else, even a word, is out of range.
func parseCount(b []byte) (int64, Reply) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != string(b) {
		return 0, errCountRange
	}
	return n, nil
}

// LMOVE source destination LEFT|RIGHT LEFT|RIGHT: LPOP/RPOP of source as
// above, then the element pushed on destination on every voting backend.
func (d *Dispatcher) lmove(ctx context.Context, c *Client, args [][]byte) Reply {
	from, to, r := d.moveArgs(args)
	if r != nil {
		return r
	}
	v, ok, err := d.leases.Pop(ctx, string(args[1]), from)
	switch {
	case err != nil:
		return d.listError(err)
	case !ok:
		return Null{}
	}
	return d.moved(ctx, string(args[2]), v, to)
}

// moveArgs checks LMOVE's and BLMOVE's keys and reads their directions
// (true: RIGHT).
func (d *Dispatcher) moveArgs(args [][]byte) (from, to bool, r Reply) {
	if _, r := d.keyList(args[1:3]); r != nil {
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
	if _, err := d.leases.Push(ctx, dst, right, []string{v}); err != nil {
		return d.listError(err)
	}
	return BulkString(v)
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
// backend (not atomic: the element is in the proxy between the two); the
// element, or the null array when the timeout passed (not LMOVE's nil).
func (d *Dispatcher) blmove(ctx context.Context, c *Client, args [][]byte) Reply {
	from, to, r := d.moveArgs(args)
	if r != nil {
		return r
	}
	return d.blockingMove(ctx, c, args[1], args[2], from, to, args[5])
}

// BRPOPLPUSH source destination timeout: BLMOVE source destination RIGHT
// LEFT (Redis 6.2 deprecated it for BLMOVE; older clients still send it).
func (d *Dispatcher) brpoplpush(ctx context.Context, c *Client, args [][]byte) Reply {
	if _, r := d.keyList(args[1:3]); r != nil {
		return r
	}
	return d.blockingMove(ctx, c, args[1], args[2], true, false, args[3])
}

// blockingMove is BLMOVE's run once its keys and directions are read.
func (d *Dispatcher) blockingMove(ctx context.Context, c *Client, src, dst []byte, from, to bool, timeoutArg []byte) Reply {
	timeout, r := parseTimeout(timeoutArg)
	if r != nil {
		return r
	}
	p, ok, r := d.blockingPop(ctx, c, relay.PopRequest{Keys: []string{string(src)}, Right: from, Timeout: timeout})
	if r != nil {
		return r
	}
	if !ok {
		return NullArray{} // as Redis answers a blocking command's timeout
	}
	return d.moved(ctx, string(dst), p.Value, to)
}

// blockingPop runs a relay pop that ends when the client leaves, or
// when CLIENT UNBLOCK ends it (as its timeout, or with -UNBLOCKED).
func (d *Dispatcher) blockingPop(ctx context.Context, c *Client, req relay.PopRequest) (relay.Popped, bool, Reply) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.blocked.Store(&cancel)
	defer c.blocked.CompareAndSwap(&cancel, nil)
	req.Cancel = c.Done()
	p, ok, err := d.relay.Pop(ctx, req)
	var ub unblocked
	switch {
	case err == nil:
		return p, ok, nil
	case errors.As(context.Cause(ctx), &ub): // what was popped is pushed back
		if ub.withError {
			return p, false, errUnblocked
		}
		return p, false, nil // as at the timeout
	case errors.Is(err, relay.ErrTooFewBackends):
		return p, false, noQuorum(Error("NOQUORUM " + err.Error()))
	case errors.Is(err, relay.ErrClosed):
		return p, false, errShuttingDown
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return p, false, errCancelled
	}
	var le *relay.LimitError
	if errors.As(err, &le) {
		return p, false, Errorf("ERR too many blocked pops: %d would exceed redlock-proxy's limit of %d %s (see docs/operations.md)",
			le.Want, le.Max, limitWhat[le.Limit])
	}
	var se relay.ServerError
	if errors.As(err, &se) && strings.HasPrefix(string(se), "WRONGTYPE") {
		return p, false, Error(se)
	}
	d.log.Warn("blocking pop failed", "error", err)
	return p, false, d.lockError(redlock.ErrNoQuorum)
}

// unblocked is the cause of a pop's end by CLIENT UNBLOCK.
type unblocked struct{ withError bool }

func (unblocked) Error() string { return "unblocked via CLIENT UNBLOCK" }

// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends another client's blocking pop
// as its timeout would, or with -UNBLOCKED; 1 when one was blocked, 0
// otherwise (as Redis, the reason is read before the id).
func (d *Dispatcher) clientUnblock(c *Client, args [][]byte) Reply {
	if r := requireAdmin(c, "client|unblock"); r != nil {
		return r
	}
	if len(args) > 4 {
		return Errorf("ERR unknown subcommand or wrong number of arguments for '%s'. Try CLIENT HELP.", args[1])
	}
	var ub unblocked
	if len(args) == 4 {
		switch strings.ToUpper(string(args[3])) {
		case "TIMEOUT":
		case "ERROR":
			ub.withError = true
		default:
			return Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
		}
	}
	id, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil {
		return errNotInteger
	}
	o := d.clients.get(id)
	if o == nil {
		return Int(0)
	}
	cancel := o.blocked.Swap(nil)
	if cancel == nil {
		return Int(0)
	}
	(*cancel)(ub)
	return Int(1)
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
