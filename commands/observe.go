package commands

import (
	"context"
	"time"
)

// Observation: Options.Observe hears about every command once, after it
// ran, with its row's lower-case name ("unknown" for names not in the
// table, so the values stay bounded), its row's Dialect ("" for commands
// that touch no lock) and its Outcome, as docs/operations.md lists them
// for the metrics. The outcome is what the handler said its reply means
// (withOutcome), never read from the arguments or the reply's text: an
// unmarked error reply is ResultError, any other unmarked reply ResultOK;
// every -NOQUORUM reply is marked where it is made (lockError and the few
// others).

// Dialects, as passed to Options.Observe.
const (
	DialectNative = "native"
	DialectLegacy = "legacy"
	DialectScript = "script"
	DialectTx     = "tx"
)

// Outcome is what one command came to, as metrics and tests name it
// (String).
type Outcome uint8

// Outcomes, as passed to Options.Observe.
const (
	ResultOK       Outcome = iota // done, or answered
	ResultHeld                    // refused: another owner holds the key
	ResultNotHeld                 // refused: not held by the caller, or nothing to act on
	ResultNoQuorum                // too few backends answered, or they disagree
	ResultError                   // any other error reply
)

var outcomeNames = [...]string{"ok", "held", "not_held", "noquorum", "error"}

// String is the outcome's metric label: ok, held, not_held, noquorum,
// error.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "error"
}

// unknownName is the command name observed for names not in the table.
const unknownName = "unknown"

// outcomeReply is a handler's reply with the outcome it counts as.
// DoPlanned returns the reply alone (unwrap).
type outcomeReply struct {
	Reply
	is Outcome
}

// withOutcome marks r as counting as o.
func withOutcome(r Reply, o Outcome) Reply { return outcomeReply{r, o} }

// Refusals marked once, so that answering one allocates nothing.
var (
	nullHeld         = withOutcome(Null{}, ResultHeld)
	nullNotHeld      = withOutcome(Null{}, ResultNotHeld)
	nullArrayHeld    = withOutcome(NullArray{}, ResultHeld)
	nullArrayNotHeld = withOutcome(NullArray{}, ResultNotHeld)
	zeroHeld         = withOutcome(Int(0), ResultHeld)
	zeroNotHeld      = withOutcome(Int(0), ResultNotHeld)
	noExpiryNotHeld  = withOutcome(Int(-1), ResultNotHeld) // EXPIRETIME of a key without expiry
	absentNotHeld    = withOutcome(Int(-2), ResultNotHeld) // PTTL, EXPIRETIME of an absent key
)

// noQuorum marks a -NOQUORUM error.
func noQuorum(e Error) Reply { return withOutcome(e, ResultNoQuorum) }

// countReply is a lock dialect's count of what it did or found (keys
// deleted, a counter's value, a remaining ttl): none is a refusal,
// not_held.
func countReply(n int64) Reply {
	switch {
	case n > 0:
		return Int(n)
	case n == 0:
		return zeroNotHeld
	}
	return withOutcome(Int(n), ResultNotHeld)
}

// scriptReply is the reply of a script or a vote, whose meaning the
// proxy reads from its convention only: null or an integer of zero or
// less is a refusal, counted as refusal.
func scriptReply(r Reply, refusal Outcome) Reply {
	switch v := r.(type) {
	case Null:
		if refusal == ResultHeld {
			return nullHeld
		}
		return nullNotHeld
	case Int:
		if v == 0 && refusal == ResultHeld {
			return zeroHeld
		}
		if v == 0 {
			return zeroNotHeld
		}
		if v < 0 {
			return withOutcome(r, refusal)
		}
	case nil, NullArray:
		return withOutcome(r, refusal)
	}
	return r
}

// unwrap is r without its outcome mark.
func unwrap(r Reply) Reply {
	if o, ok := r.(outcomeReply); ok {
		return o.Reply
	}
	return r
}

// outcomeOf is the outcome r counts as: its mark, else error for an error
// reply and ok for any other.
func outcomeOf(r Reply) Outcome {
	switch r := r.(type) {
	case outcomeReply:
		return r.is
	case Error:
		return ResultError
	}
	return ResultOK
}

// doObserved is do timed and reported to Options.Observe.
func (d *Dispatcher) doObserved(ctx context.Context, c *Client, cmd *Command, args [][]byte, p parsedCall) Reply {
	// A command queued inside MULTI is part of the transaction dialect,
	// whatever it is on its own; decide before do changes the state.
	queued := c.tx.multi && cmd != nil && cmd.Flags&TxControl == 0
	start := time.Now()
	r := d.do(ctx, c, cmd, args, p)
	elapsed := time.Since(start)

	name, dialect := unknownName, ""
	if cmd != nil {
		name, dialect = cmd.lower, cmd.Dialect
		if queued {
			dialect = DialectTx
		}
	}
	d.opts.Observe(name, dialect, outcomeOf(r), elapsed)
	return r
}
