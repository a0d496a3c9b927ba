package backend

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// CallKind names the method of package redlock's Node a Command stands for.
type CallKind uint8

const (
	CallSetNX CallKind = iota // SetNX(Keys[0], Value, TTL) → granted, with the version
	CallCAD                   // CompareAndDelete(Keys[0], Value) → bool
	CallCAE                   // CompareAndExpire(Keys[0], Value, TTL) → bool
	CallEval                  // Eval(Script, Keys, Args...) → any
	CallDo                    // Do(Args...) → any
)

// Command is what an operation of package redlock (a fan-out) asks of
// every node: one of the calls of its Node interface, written down as data
// so that a RedisNode can pipeline it without a goroutine per call
// (Sender), and any other node can run it as a method call.
type Command struct {
	Kind   CallKind
	Script *script.Script // CallEval
	Keys   []string
	Value  string        // CallSetNX, CallCAD, CallCAE
	TTL    time.Duration // CallSetNX, CallCAE
	Args   []any         // CallEval: the script's ARGV; CallDo: the command
	// Read: a read by vote (VoteRead), sent on the node's connection
	// apart from the lock calls, so that a large reply never holds up a
	// lock quorum's replies behind its bytes, and as EVALSHA_RO, so that
	// the backend refuses any write it tries.
	Read bool
}

// Target is the operation a call belongs to (a fan-out): where the result
// of a command started with Send goes.
type Target interface {
	// Deliver gets the result of the call tagged tag, as RedisNode.Run
	// would have returned it. It must not block. Until the call is owned, the
	// first of Deliver and the deadline takes it; a pipelined call may be
	// taken at the deadline because the pipe never writes a request past
	// its deadline.
	Deliver(tag int, v any, err error)
	// Own claims the call tagged tag for a goroutine that runs it with
	// the deadline in its context and alone delivers its result, so that
	// an undo waits until the call has returned. It reports false when
	// the deadline took the call first: it must then not be sent.
	Own(tag int) bool
	// Spawn runs fn, which must end by the call's deadline, in a
	// goroutine that the operation's owner waits for.
	Spawn(fn func())
}

// Sender starts a command on one node without blocking the caller: the
// result goes to to.Deliver(tag, …) exactly once. A RedisNode pipelines;
// package redlock runs any other node's commands with GoSend. With lone,
// no other operation is waiting: a pipelined node may write the command
// on the caller's goroutine.
type Sender interface {
	Send(c *Command, deadline time.Time, to Target, tag int, lone bool)
}

// GoSend runs a call (run: a node's method, waiting for the result) in a
// goroutine owned by to, with the deadline in its context (see Target.Own).
func GoSend(run func(context.Context) (any, error), deadline time.Time, to Target, tag int) {
	if !to.Own(tag) {
		return
	}
	to.Spawn(func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		v, err := run(ctx)
		to.Deliver(tag, v, err)
	})
}
