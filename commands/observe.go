package commands

import (
	"context"
	"strings"
	"time"
)

// Observation: Options.Observe hears about every command once, after it
// ran, with three short names that suit metric labels. The command is the
// table row's lower-case name ("unknown" for names not in the table), so
// the set of values is bounded whatever clients send.
//
// The dialect is the row's Dialect column: native (LOCK, UNLOCK, EXTEND,
// and later native commands), legacy (the single-Redis string and key
// commands), script (EVAL, EVALSHA, SCRIPT), tx (WATCH … EXEC, and any
// command queued inside MULTI). It is "" for the rest (connection, server
// and pub/sub commands), which touch no lock.
//
// The result is the command's outcome, read from the reply the handler
// returned, never from its arguments again: noquorum for a -NOQUORUM
// error, error for any other error reply. A lock dialect's null, zero or
// negative integer reply (PTTL's -1 aside) is a refusal: counted as the
// handler said with refusedAs (SET NX and a script whose meaning is an
// acquire: held; SET … GET of a free key: ok), else held for a row that
// Acquires (LOCK, MLOCK, SETNX) and not_held for the rest (UNLOCK,
// EXTEND, compare-and-set or -delete, EXEC whose condition failed, GET or
// EXISTS of a free key). Everything else is ok.

// Dialects, as passed to Options.Observe.
const (
	DialectNative = "native"
	DialectLegacy = "legacy"
	DialectScript = "script"
	DialectTx     = "tx"
)

// Results, as passed to Options.Observe.
const (
	ResultOK       = "ok"
	ResultHeld     = "held"
	ResultNotHeld  = "not_held"
	ResultNoQuorum = "noquorum"
	ResultError    = "error"
)

// unknownName is the command name observed for names not in the table.
const unknownName = "unknown"

// outcome is a handler's reply with the result a refusal of it counts
// as (refusedAs). DoPlanned returns the reply alone.
type outcome struct {
	Reply
	refusal string
}

// refusedAs marks r so that, when it is a refusal (null, zero), Observe
// counts it as result: for commands whose row alone does not say what a
// refusal means.
func refusedAs(r Reply, result string) Reply { return outcome{r, result} }

// unwrap is r without its outcome mark.
func unwrap(r Reply) Reply {
	if o, ok := r.(outcome); ok {
		return o.Reply
	}
	return r
}

// doObserved is do timed and reported to Options.Observe.
func (d *Dispatcher) doObserved(ctx context.Context, c *Client, cmd *Command, args, keys [][]byte) Reply {
	// A command queued inside MULTI is part of the transaction dialect,
	// whatever it is on its own; decide before do changes the state.
	queued := c.tx.multi && cmd != nil && cmd.Flags&TxControl == 0
	start := time.Now()
	r := d.do(ctx, c, cmd, args, keys)
	elapsed := time.Since(start)

	name, dialect := unknownName, ""
	if cmd != nil {
		name, dialect = cmd.lower, cmd.Dialect
		if queued {
			dialect = DialectTx
		}
	}
	d.opts.Observe(name, dialect, resultOf(cmd, dialect, r), elapsed)
	return r
}

// resultOf names the outcome of a command from its reply.
func resultOf(cmd *Command, dialect string, r Reply) string {
	refusal := ""
	if o, ok := r.(outcome); ok {
		r, refusal = o.Reply, o.refusal
	}
	switch r := r.(type) {
	case Error:
		if strings.HasPrefix(string(r), "NOQUORUM") {
			return ResultNoQuorum
		}
		return ResultError
	case nil, Null, NullArray:
		if dialect != "" {
			return refused(cmd, refusal)
		}
	case Int:
		// 0 is "not done" (UNLOCK, SETNX, DEL…), -1 and -2 the library
		// scripts' and PTTL's "not held", except PTTL's -1: held forever.
		noExpiry := r == -1 && (cmd.Name == "PTTL" || cmd.Name == "TTL")
		if r <= 0 && dialect != "" && !noExpiry {
			return refused(cmd, refusal)
		}
	}
	return ResultOK
}

// refused names a lock dialect's refusal: as its handler said, else held
// when the row acquires, not_held otherwise.
func refused(cmd *Command, said string) string {
	switch {
	case said != "":
		return said
	case cmd.Flags&Acquires != 0:
		return ResultHeld
	}
	return ResultNotHeld
}
