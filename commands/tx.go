package commands

import (
	"context"
	"time"
)

// txState is a client's WATCH/MULTI state (docs/compatibility.md, "How
// each dialect maps to the quorum"). Reads queued (the table's Reads
// commands that do not write) and the proxy's own answers that change
// nothing (PING, ECHO, INFO, …) run at EXEC in order, each read a quorum
// read of its own, not atomic across the backends; CLIENT CACHING YES before
// MULTI tracks their keys (rueidis DoCache). The StackExchange.Redis lock
// transaction (WATCH k, GET k, MULTI, DEL k or PEXPIRE/EXPIRE k t, EXEC)
// becomes at EXEC a compare-and-delete or -expire of the value read after
// WATCH, the condition the transaction expresses on one Redis.
type txState struct {
	watched map[string]*string // key → value read by GET after WATCH (nil: not read, or absent)
	multi   bool
	dirty   bool
	queue   []txOp
	caching int32 // CLIENT CACHING before MULTI (tracking.go)
}

// txOp is one queued command, parsed and checked when it was queued.
type txOp struct {
	key  string
	ttl  time.Duration // PEXPIRE/EXPIRE; zero for DEL
	read *Command      // a read, run at EXEC with args
	args [][]byte
}

func (t *txState) reset() { *t = txState{} }

// noteRead remembers what GET returned for a watched key.
func (t *txState) noteRead(key string, value *string) {
	if _, ok := t.watched[key]; ok {
		t.watched[key] = value
	}
}

const errTxOnly = "ERR redlock-proxy transactions support only reads (any read-only command: GET, EXISTS, PTTL, HGET, SMEMBERS, …), the proxy's own answers (PING, ECHO, TIME, INFO, …) and DEL, PEXPIRE or EXPIRE of one watched key whose value was read with GET after WATCH"

// queue is called by do for commands inside MULTI; it validates the
// command now, as Redis does, so EXEC can only abort or run.
func (d *Dispatcher) queue(c *Client, cmd *Command, args [][]byte) Reply {
	// Reads, and the proxy's own answers that change nothing (Local, not a
	// Barrier: PING, ECHO, INFO, …), run at EXEC in order.
	if cmd.Flags&(Reads|Writes) == Reads || cmd.Flags&(Local|Barrier|Writes) == Local {
		// Copied: the arguments may sit in the connection's read buffer.
		c.tx.queue = append(c.tx.queue, txOp{read: cmd, args: CopyArgs(args)})
		return Simple("QUEUED")
	}
	if cmd.Flags&InMulti == 0 || len(args) < 2 {
		c.tx.dirty = true
		return Error(errTxOnly)
	}
	if v, ok := c.tx.watched[string(args[1])]; !ok || v == nil || (cmd.Name == "DEL" && len(args) != 2) {
		c.tx.dirty = true
		return Error(errTxOnly)
	}
	op := txOp{key: string(args[1])}
	if cmd.Name != "DEL" { // PEXPIRE or EXPIRE, checked as outside MULTI
		n, unit, r := expireArgs(args)
		if r == nil && n <= 0 {
			r = Errorf("ERR invalid expire time in '%s' command", cmd.lower)
		}
		if r == nil {
			op.ttl, r = d.ttlIn(n, unit)
		}
		if r != nil {
			c.tx.dirty = true
			return r
		}
	}
	c.tx.queue = append(c.tx.queue, op)
	return Simple("QUEUED")
}

// WATCH key [key ...]
func (d *Dispatcher) watch(ctx context.Context, c *Client, args [][]byte) Reply {
	if c.tx.multi {
		return Error("ERR WATCH inside MULTI is not allowed")
	}
	if c.tx.watched == nil {
		c.tx.watched = make(map[string]*string)
	}
	for _, k := range args[1:] {
		c.tx.watched[string(k)] = nil
	}
	return OK
}

// UNWATCH
func (d *Dispatcher) unwatch(ctx context.Context, c *Client, args [][]byte) Reply {
	c.tx.watched = nil
	return OK
}

// MULTI
func (d *Dispatcher) multi(ctx context.Context, c *Client, args [][]byte) Reply {
	if c.tx.multi {
		return Error("ERR MULTI calls can not be nested")
	}
	c.tx.multi = true
	return OK
}

// DISCARD
func (d *Dispatcher) discard(ctx context.Context, c *Client, args [][]byte) Reply {
	if !c.tx.multi {
		return Error("ERR DISCARD without MULTI")
	}
	c.tx.reset()
	return OK
}

// EXEC runs the queued reads in order, or the queued compare-and-delete /
// compare-and-expire, which answers null, like a transaction whose WATCH
// fired, when the key no longer holds the value read after WATCH on a
// quorum.
func (d *Dispatcher) exec(ctx context.Context, c *Client, args [][]byte) Reply {
	if !c.tx.multi {
		return Error("ERR EXEC without MULTI")
	}
	tx := c.tx
	c.tx.reset()
	if tx.dirty {
		return Error("EXECABORT Transaction discarded because of previous errors.")
	}
	reads, covered := d.trackTx(ctx, c, tx)
	out := make(Array, 0, len(tx.queue))
	for _, op := range tx.queue {
		if op.read != nil {
			var p parsedCall // a read's keys are by position, but EVAL_RO's
			if op.read.keys != nil {
				p = parsedCall{keys: op.read.keys(op.args), ok: true}
			}
			out = append(out, unwrap(op.read.call(d, ctx, c, op.args, p)))
			continue
		}
		token := *tx.watched[op.key]
		var r Reply
		if op.ttl == 0 {
			r = d.release(ctx, op.key, token)
		} else {
			r = d.extendToken(ctx, op.key, token, op.ttl)
		}
		switch unwrap(r) {
		case Int(0), Null{}:
			return nullArrayNotHeld
		}
		if _, isErr := unwrap(r).(Error); isErr {
			return r
		}
		out = append(out, Int(1))
	}
	if !covered {
		d.invalidated(c, reads)
	}
	return out
}

// trackTx tracks the keys of a transaction's reads for a tracking client
// before they run, and returns them and whether the backends cover them
// (tracking.go).
func (d *Dispatcher) trackTx(ctx context.Context, c *Client, tx txState) ([]string, bool) {
	t := c.trk.Load()
	if t == nil || !t.wants(tx.caching, c.Proto()) {
		return nil, true
	}
	var keys []string
	seen := map[string]bool{}
	for _, op := range tx.queue {
		if op.read == nil {
			continue
		}
		for _, k := range commandKeys(op.read, op.args, nil) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil, true
	}
	covered, err := t.w.Track(ctx, keys)
	return keys, covered && err == nil
}

// CopyArgs copies a command's arguments into one allocation, for a
// command kept past the read that gave it (a queued transaction, a
// pipelined command run on its own goroutine).
func CopyArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		start := len(buf)
		buf = append(buf, a...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}
