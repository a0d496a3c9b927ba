package redlock

import (
	"context"
	"fmt"
	"time"
)

// A command is what an operation asks of every node: one of Node's calls,
// written down as data so that a pipelined node (see sender) can send it
// without a goroutine per call, and any other node can run it with run.

// callKind names the Node method a command stands for.
type callKind uint8

const (
	callSetNX callKind = iota // SetNX(keys[0], value, ttl) → bool
	callCAD                   // CompareAndDelete(keys[0], value) → bool
	callCAE                   // CompareAndExpire(keys[0], value, ttl) → bool
	callEval                  // Eval(script, keys, args...) → any
	callDo                    // Do(args...) → any
)

type command struct {
	kind   callKind
	script *Script // callEval
	keys   []string
	value  string        // callSetNX, callCAD, callCAE
	ttl    time.Duration // callSetNX, callCAE
	args   []any         // callEval: the script's ARGV; callDo: the command
}

// run runs c on n and waits for the result: what the Node method returns,
// the bool of SetNX and the compare calls boxed in any.
func (c *command) run(ctx context.Context, n Node) (any, error) {
	switch c.kind {
	case callSetNX:
		ok, err := n.SetNX(ctx, c.keys[0], c.value, c.ttl)
		return ok, err
	case callCAD:
		ok, err := n.CompareAndDelete(ctx, c.keys[0], c.value)
		return ok, err
	case callCAE:
		ok, err := n.CompareAndExpire(ctx, c.keys[0], c.value, c.ttl)
		return ok, err
	case callEval:
		return n.Eval(ctx, c.script, c.keys, c.args...)
	default:
		return n.Do(ctx, c.args...)
	}
}

// target receives the result of a command started with send.
type target interface {
	// deliver gets the result of the call tagged tag, as run would have
	// returned it. It is called once per send, from any goroutine, and
	// must not block.
	deliver(tag int, v any, err error)
	// spawn runs fn, which must end by the call's deadline, in a
	// goroutine that Redlock.Close waits for.
	spawn(fn func())
}

// sender is a Node that can start a command without blocking.
type sender interface {
	// send starts c, to be answered by deadline, and returns true: the
	// result then goes to to.deliver(tag, …) exactly once. It returns
	// false, having started nothing, when it cannot start c without
	// blocking (no live connection, a full queue, a command it does not
	// pipeline); the caller runs c itself.
	send(c *command, deadline time.Time, to target, tag int) bool
}

// asBool reads the result of a SetNX or compare call.
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
