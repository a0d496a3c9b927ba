package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// A command is what an operation asks of every node: one of Node's calls,
// written down as data so that a pipelined node (see sender) can send it
// without a goroutine per call, and any other node can run it with run.

// callKind names the Node method a command stands for.
type callKind uint8

const (
	callSetNX callKind = iota // SetNX(keys[0], value, ttl) → grant
	callCAD                   // CompareAndDelete(keys[0], value) → bool
	callCAE                   // CompareAndExpire(keys[0], value, ttl) → bool
	callEval                  // Eval(script, keys, args...) → any
	callDo                    // Do(args...) → any
)

type command struct {
	kind   callKind
	script *script.Script // callEval
	keys   []string
	value  string        // callSetNX, callCAD, callCAE
	ttl    time.Duration // callSetNX, callCAE
	args   []any         // callEval: the script's ARGV; callDo: the command
	// read: a read by vote (VoteRead), sent on the node's connection
	// apart from the lock calls, so that a large reply never holds up a
	// lock quorum's replies behind its bytes, and as EVALSHA_RO, so that
	// the backend refuses any write it tries.
	read bool
}

// run runs c on n and waits for the result: what the Node method returns,
// SetNX's as a grant, the bool of the compare calls boxed in any.
func (c *command) run(ctx context.Context, n Node) (any, error) {
	switch c.kind {
	case callSetNX:
		ok, ver, err := n.SetNX(ctx, c.keys[0], c.value, c.ttl)
		return grant{ok: ok, ver: ver}, err
	case callCAD:
		ok, err := n.CompareAndDelete(ctx, c.keys[0], c.value)
		return ok, err
	case callCAE:
		ok, err := n.CompareAndExpire(ctx, c.keys[0], c.value, c.ttl)
		return ok, err
	case callEval:
		if rn, ok := n.(*RedisNode); ok {
			return rn.runPipe(ctx, c) // Eval, as c asks (read)
		}
		return n.Eval(ctx, c.script, c.keys, c.args...)
	default:
		return n.Do(ctx, c.args...)
	}
}

// target is the operation a call belongs to (a fan-out): where the result
// of a command started with send goes.
type target interface {
	// deliver gets the result of the call tagged tag, as run would have
	// returned it. It must not block. Until the call is owned, the first
	// of deliver and the deadline takes it; a pipelined call may be
	// taken at the deadline because the pipe never writes a request past
	// its deadline.
	deliver(tag int, v any, err error)
	// own claims the call tagged tag for a goroutine that runs it with
	// the deadline in its context and alone delivers its result, so that
	// an undo waits until the call has returned. It reports false when
	// the deadline took the call first: it must then not be sent.
	own(tag int) bool
	// spawn runs fn, which must end by the call's deadline, in a
	// goroutine that Redlock.Close waits for.
	spawn(fn func())
}

// sender starts a command on one node without blocking the caller: the
// result goes to to.deliver(tag, …) exactly once. Every node has one: a
// RedisNode pipelines, any other Node is wrapped in a goSender. With
// lone, no other operation is waiting: a pipelined node may write the
// command on the caller's goroutine.
type sender interface {
	send(c *command, deadline time.Time, to target, tag int, lone bool)
}

// goSender runs each command of a plain Node in a goroutine of its own.
type goSender struct{ n Node }

func (g goSender) send(c *command, deadline time.Time, to target, tag int, _ bool) {
	goSend(g.n, c, deadline, to, tag)
}

// goSend runs c on n in an owned goroutine with the deadline in its
// context (see target.own).
func goSend(n Node, c *command, deadline time.Time, to target, tag int) {
	if !to.own(tag) {
		return
	}
	to.spawn(func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		v, err := c.run(ctx, n)
		to.deliver(tag, v, err)
	})
}

// senderOf is n's sender.
func senderOf(n Node) sender {
	if s, ok := n.(sender); ok {
		return s
	}
	return goSender{n}
}

// asBool reads the result of a compare call.
func asBool(v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, fmt.Errorf("unexpected result %T, want bool", v)
}

// intIs1 reads a script's 1 (done) or 0 (not).
func intIs1(v any) (bool, error) {
	x, err := asInt(v)
	return x == 1, err
}
