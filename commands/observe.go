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
// The dialect is how the command reaches a lock, taken from the row's
// group: native (LOCK, UNLOCK, EXTEND, and later native commands), legacy
// (the single-Redis string and key commands), script (EVAL, EVALSHA,
// SCRIPT), tx (WATCH … EXEC, and any command queued inside MULTI). It is
// "" for the rest (connection, server and pub/sub commands), which touch
// no lock.
//
// The result comes from the reply: noquorum for a -NOQUORUM error, error
// for any other error reply. A lock dialect's null, zero or negative
// integer reply (PTTL's -1 aside) is held when the command tried to
// acquire (LOCK, MLOCK, SETNX, SET NX, an acquiring library script), else
// not_held (UNLOCK, EXTEND, compare-and-set or -delete, EXEC whose
// condition failed, GET or EXISTS of a free key).
// Everything else is ok.

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

// dialectOf maps a table row's group to its dialect.
func dialectOf(group string) string {
	switch group {
	case "lock":
		return DialectNative
	case "string", "generic", "sorted-set":
		return DialectLegacy
	case "scripting":
		return DialectScript
	case "transactions":
		return DialectTx
	}
	return ""
}

// doObserved is Do timed and reported to Options.Observe.
func (d *Dispatcher) doObserved(ctx context.Context, c *Client, args [][]byte) Reply {
	cmd := d.lookup(args[0])
	// A command queued inside MULTI is part of the transaction dialect,
	// whatever it is on its own; decide before do changes the state.
	queued := c.tx.multi && cmd != nil && cmd.Flags&TxControl == 0
	start := time.Now()
	r := d.do(ctx, c, args)
	elapsed := time.Since(start)

	name, dialect := unknownName, ""
	if cmd != nil {
		name, dialect = cmd.lower, dialectOf(cmd.Group)
		if queued {
			dialect = DialectTx
		}
	}
	d.opts.Observe(name, dialect, d.resultOf(cmd, dialect, args, r), elapsed)
	return r
}

// resultOf names the outcome of a command from its reply.
func (d *Dispatcher) resultOf(cmd *Command, dialect string, args [][]byte, r Reply) string {
	switch r := r.(type) {
	case Error:
		if strings.HasPrefix(string(r), "NOQUORUM") {
			return ResultNoQuorum
		}
		return ResultError
	case nil, Null, NullArray:
		if dialect != "" {
			return d.refusal(cmd, args)
		}
	case Int:
		// 0 is "not done" (UNLOCK, SETNX, DEL…), -1 and -2 the library
		// scripts' and PTTL's "not held", except PTTL's -1: held forever.
		noExpiry := r == -1 && (cmd.Name == "PTTL" || cmd.Name == "TTL")
		if r <= 0 && dialect != "" && !noExpiry {
			return d.refusal(cmd, args)
		}
	}
	return ResultOK
}

// refusal names a lock dialect's null or zero reply: held when cmd tried
// to acquire, not_held otherwise. It runs only on that path, so the
// script lookup costs nothing on success.
func (d *Dispatcher) refusal(cmd *Command, args [][]byte) string {
	if cmd.Flags&Acquires != 0 {
		return ResultHeld
	}
	switch cmd.Name {
	case "SET":
		// Read by SET's own parser (less the expiry, which may have
		// passed since): SET k v … IFEQ old is a renewal, SET k v NX an
		// acquire, and a plain SET k v GET answers null for a key that
		// was free.
		req, _, _, r := d.parseSetWords(args)
		switch {
		case r != nil || req.ifeq != nil:
			return ResultNotHeld
		case req.nx:
			return ResultHeld
		}
		return ResultOK
	case "EVAL", "EVALSHA":
		if d.scriptAcquires(cmd.Name, args) {
			return ResultHeld
		}
	}
	return ResultNotHeld
}
