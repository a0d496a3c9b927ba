package commands

import (
	"bytes"
	"context"
)

// Plan says how a connection may run a command among the ones it already
// has in flight (package proxy runs a connection's commands concurrently
// and answers them in arrival order):
//
//   - a Barrier runs alone: after every earlier command of the connection
//     has completed, and every later one waits for it. docs/commands.md
//     ("Pipelining") lists the barriers, as Redis orders them; among them
//     a script that may build keys from its declared keys (KEYS[1] ..
//     ':x': buildsKeys), whose keys no plan can name;
//   - any other command waits for the commands before it that share one of
//     its Keys, so the commands on one key run in arrival order;
//   - a Local command is answered without a backend round trip, so the
//     connection may run it on its reader when nothing is in flight.
type Plan struct {
	Barrier bool
	Local   bool
	// Blocks: it may wait long (LOCK … WAIT); the connection must keep
	// reading meanwhile, to notice a client that leaves.
	Blocks bool
	Keys   [][]byte // sub-slices of the command's arguments
	// OpensTx (MULTI) and ClosesTx (EXEC, DISCARD, RESET, QUIT): the
	// commands after it are inside a transaction, or no longer (PlanFor
	// keeps track).
	OpensTx, ClosesTx bool
	// silent: the client turned its replies off (CLIENT REPLY OFF|SKIP):
	// DoPlanned runs the command and writes nothing.
	silent bool
	cmd    *Command   // the row, for DoPlanned; nil: not in the table
	parsed parsedCall // what Plan parsed of the call, for DoPlanned
}

// parsedCall is what is parsed of one call once, by Plan or else by run,
// and handed on to the handler: the keys of a row that finds them by
// parsing (the keys column: EVAL's numkeys; ok: parsed, and nil keys then
// mean an invalid count), and an EVAL's script SHA1 when Plan hashed it
// (to know whether the script builds keys).
type parsedCall struct {
	keys [][]byte
	ok   bool
	sha  string // hex; "": not hashed yet
}

// keysOf is the keys of a call with args: parsed, given parsed once for
// the call when the row parses them, else by position.
func (c *Command) keysOf(args, parsed [][]byte) [][]byte {
	if c.keys != nil {
		if parsed == nil { // not planned: a command queued in MULTI, say
			return c.keys(args)
		}
		return parsed
	}
	if first, last := c.keyRange(len(args)); first > 0 {
		return args[first : last+1]
	}
	return nil
}

// call runs the row's handler, giving what was parsed of the call to a
// handler that takes it.
func (c *Command) call(d *Dispatcher, ctx context.Context, cl *Client, args [][]byte, p parsedCall) Reply {
	if c.runKeys != nil {
		return c.runKeys(d, ctx, cl, args, p)
	}
	return c.run(d, ctx, cl, args)
}

// Plan classifies a command by its table row and arguments. It changes
// nothing and may run before the commands ahead of it have run; tx is
// whether an earlier MULTI of the connection is still open as far as the
// caller has read (every command inside MULTI is a barrier: its place in
// the transaction's queue is its arrival).
func (d *Dispatcher) Plan(args [][]byte, tx bool) Plan {
	if len(args) == 0 {
		return Plan{Local: true}
	}
	cmd := d.lookup(args[0])
	if cmd == nil || !cmd.arityOK(len(args)) {
		return Plan{Local: true, cmd: cmd} // answered with an error at once
	}
	p := Plan{Barrier: tx || cmd.Flags&Barrier != 0, Local: cmd.Flags&Local != 0, cmd: cmd}
	switch cmd.Name {
	case "MULTI":
		p.OpensTx = true
	case "EXEC", "DISCARD", "RESET", "QUIT":
		p.ClosesTx = true
	}
	if cmd.keys != nil {
		p.parsed = parsedCall{keys: cmd.keys(args), ok: true}
	}
	if p.Barrier {
		return p
	}
	if cmd.Name == "LOCK" && lockWaits(args) || cmd.Flags&Blocking != 0 {
		return Plan{Barrier: true, Blocks: true, cmd: cmd}
	}
	bySource := cmd.Name == "EVAL" || cmd.Name == "EVAL_RO"
	if bySource {
		p.parsed.sha = hashScript(args[1])
	}
	if (bySource || cmd.Name == "EVALSHA" || cmd.Name == "EVALSHA_RO") && d.buildsKeys(bySource, args, p.parsed.sha) {
		p.Barrier = true // the keys it builds have no names yet
		return p
	}
	p.Keys = cmd.keysOf(args, p.parsed.keys)
	return p
}

// PlanFor is Plan for the next command read on client c's connection:
// it knows whether an earlier MULTI is still open as far as the
// connection has read (and updates that), and the command right after
// CLIENT CACHING YES|NO is a barrier, since the flag applies to it alone
// (tracking.go). After CLIENT REPLY OFF, or right after SKIP, the
// command is silent (CLIENT REPLY itself decides its own reply); CLIENT is
// a local barrier, so the mode is set before the next command is read.
// Only the connection's reader calls it, in the order it reads commands.
func (d *Dispatcher) PlanFor(c *Client, args [][]byte) Plan {
	p := d.Plan(args, c.readTx)
	switch m := c.replies.Load(); {
	case m == repliesOn, isClientReply(p.cmd, args):
	case m == repliesOff && p.cmd != nil && p.cmd.Name == "RESET": // it turns replies on, and answers
	default:
		p.silent = true
		c.replies.CompareAndSwap(repliesSkip, repliesOn)
	}
	switch {
	case p.OpensTx:
		c.readTx = true
	case p.ClosesTx:
		c.readTx = false
	}
	if !p.Barrier && c.caching.Load() != cachingUnset {
		p.Barrier, p.Keys = true, nil
	}
	return p
}

// Rebind points what p holds of its command's arguments (the keys) at
// args, a copy of those arguments: a connection copies a command's
// arguments out of its read buffer before the command runs on another
// goroutine, and the buffer is read into again meanwhile.
func (p *Plan) Rebind(args [][]byte) {
	if p.cmd == nil {
		return
	}
	if p.parsed.ok {
		p.parsed.keys = p.cmd.keys(args)
	}
	if p.Keys != nil {
		p.Keys = p.cmd.keysOf(args, p.parsed.keys)
	}
}

// DoPlanned runs a command PlanFor planned (see run), without a second
// look-up of its row.
func (d *Dispatcher) DoPlanned(ctx context.Context, c *Client, p Plan, args [][]byte) Reply {
	if len(args) == 0 {
		return nil
	}
	r := d.run(ctx, c, p.cmd, args, p.parsed)
	if p.silent {
		return noReply
	}
	return r
}

// isClientReply reports a CLIENT REPLY command: it answers by its own rule.
func isClientReply(cmd *Command, args [][]byte) bool {
	return cmd != nil && cmd.Name == "CLIENT" && len(args) > 1 && bytes.EqualFold(args[1], []byte("REPLY"))
}

// lockWaits reports a LOCK … WAIT ms with ms > 0: it blocks.
func lockWaits(args [][]byte) bool {
	for i := 3; i+1 < len(args); i++ {
		if option(args[i]) == "WAIT" {
			return string(args[i+1]) != "0"
		}
	}
	return false
}
