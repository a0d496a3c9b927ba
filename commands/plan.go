package commands

// Plan says how a connection may run a command among the ones it already
// has in flight (package proxy runs a connection's commands concurrently
// and answers them in arrival order):
//
//   - a Barrier runs alone: after every earlier command of the connection
//     has completed, and every later one waits for it. Connection-state
//     commands (AUTH, HELLO, SELECT, CLIENT, RESET, QUIT), transactions
//     (WATCH … EXEC, and every command inside MULTI), the subscribe family,
//     commands on every key (FLUSHDB, SCRIPT) and blocking commands
//     (LOCK … WAIT, BLPOP, BRPOP, BLMOVE) are barriers, as Redis orders
//     them; so is a script that may build keys from its declared keys
//     (KEYS[1] .. ':x': buildsKeys), whose keys no plan can name;
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
	// OpensTx (MULTI) and ClosesTx (EXEC, DISCARD, RESET, QUIT) are for
	// the caller's tx argument of Plan.
	OpensTx, ClosesTx bool
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
		return Plan{Local: true} // answered with an error at once
	}
	p := Plan{Barrier: tx || cmd.Flags&Barrier != 0, Local: cmd.Flags&Local != 0}
	switch cmd.Name {
	case "MULTI":
		p.OpensTx = true
	case "EXEC", "DISCARD", "RESET", "QUIT":
		p.ClosesTx = true
	}
	if p.Barrier {
		return p
	}
	if cmd.Name == "LOCK" && lockWaits(args) || cmd.Flags&Blocking != 0 {
		return Plan{Barrier: true, Blocks: true}
	}
	if (cmd.Name == "EVAL" || cmd.Name == "EVALSHA") && d.buildsKeys(cmd.Name, args) {
		return Plan{Barrier: true} // the keys it builds have no names yet
	}
	if cmd.keys != nil {
		p.Keys = cmd.keys(args)
	} else if first, last := cmd.keyRange(len(args)); first > 0 {
		p.Keys = args[first : last+1]
	}
	return p
}

// PlanFor is Plan for client c: the command right after CLIENT CACHING
// YES|NO is a barrier, since the flag applies to it alone (tracking.go),
// and blocking list pops are Blocks barriers.
func (d *Dispatcher) PlanFor(c *Client, args [][]byte, tx bool) Plan {
	p := d.Plan(args, tx)
	if !p.Barrier && c.caching.Load() != cachingUnset {
		p.Barrier, p.Keys = true, nil
	}
	return p
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
