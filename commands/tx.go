package commands

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
)

// txState is a client's WATCH/MULTI state (docs/compatibility.md, "How
// each dialect maps to the quorum"). A transaction that writes runs at
// EXEC as one script by vote (execScript): every backend runs it whole,
// and it keeps the promises of any script by vote; after WATCH, each
// watched key must have been read with GET, and the script first checks
// that it still holds what was read (it answers null, as a transaction
// whose WATCH fired, when one does not). Reads
// queued alone (the table's Reads commands that do not write) run at
// EXEC in order, each a quorum read of its own, not atomic across the
// backends; CLIENT CACHING YES before MULTI tracks their keys (rueidis
// DoCache). The proxy's own answers that change nothing (PING, ECHO,
// INFO, …) are answered at EXEC in their place. The StackExchange.Redis
// lock transaction (WATCH k, GET k, MULTI, DEL k or PEXPIRE/EXPIRE k t,
// EXEC) becomes at EXEC a compare-and-delete or -expire of the value read
// after WATCH, the condition the transaction expresses on one Redis.
type txState struct {
	watched map[string]watchRead // key → what GET read of it after WATCH
	multi   bool
	dirty   bool
	writes  bool // a write queued for the transaction's script
	noCall  bool // a read queued that a script by vote cannot call
	bytes   int  // the queued commands' arguments
	queue   []txOp
	caching int32 // CLIENT CACHING before MULTI (tracking.go)
}

// watchRead is what GET read of a watched key after WATCH.
type watchRead struct {
	read  bool
	value *string // nil: absent
}

// txOp is one queued command, parsed and checked when it was queued.
type txOp struct {
	lock bool          // the watched lock's DEL or expire (StackExchange.Redis)
	ttl  time.Duration // lock: PEXPIRE/EXPIRE; zero for DEL
	cmd  *Command      // run at EXEC with args (a lock op: in a transaction that writes)
	args [][]byte
}

// maxTxCallArgs is the most arguments a command of a transaction that
// writes may take: each is an argument of one call in its script, and
// Lua 5.1 compiles no call with more than about 250.
const maxTxCallArgs = 200

// maxTxQueued and maxTxBytes bound what one client's open transaction
// holds in the proxy's memory until EXEC.
const (
	maxTxQueued = 10_000
	maxTxBytes  = 16 << 20
)

func (t *txState) reset() { *t = txState{} }

// noteRead remembers what GET returned for a watched key.
func (t *txState) noteRead(key string, value *string) {
	if _, ok := t.watched[key]; ok {
		t.watched[key] = watchRead{read: true, value: value}
	}
}

const errTxOnly = "ERR redlock-proxy transactions run reads, the proxy's own answers (PING, ECHO, TIME, INFO, …) and commands a script by vote may call (one script on every backend); after WATCH, writes need every watched key read with GET after WATCH"

// queue is called by do for commands inside MULTI; it validates the
// command now, as Redis does, so EXEC can only abort or run.
func (d *Dispatcher) queue(c *Client, cmd *Command, args [][]byte) Reply {
	tx := &c.tx
	for _, a := range args {
		tx.bytes += len(a)
	}
	switch {
	case len(tx.queue) >= maxTxQueued || tx.bytes > maxTxBytes:
		return tx.refuse(Errorf("ERR redlock-proxy queues at most %d commands and %d MiB of arguments in one transaction", maxTxQueued, maxTxBytes>>20))
	case cmd.Flags&(Local|Barrier|Writes) == Local: // the proxy's own answers, changing nothing
	case cmd.Flags&(Reads|Writes) == Reads:
		callable := lua.Callable(cmd.Name)
		if tx.writes && !callable {
			return tx.refuse(Errorf("ERR redlock-proxy runs a transaction that writes as one script by vote, which cannot call '%s'", cmd.lower))
		}
		tx.noCall = tx.noCall || !callable
	case cmd.Flags&InMulti != 0 && tx.watched[string(args[1])].value != nil && (cmd.Name != "DEL" || len(args) == 2):
		return d.queueLockOp(c, cmd, args)
	case !tx.allRead() || !lua.Callable(cmd.Name):
		return tx.refuse(Error(errTxOnly))
	case tx.noCall:
		return tx.refuse(Error("ERR redlock-proxy runs a transaction that writes as one script by vote, which cannot call a read queued before it"))
	case len(args) > maxTxCallArgs:
		return tx.refuse(Errorf("ERR redlock-proxy runs a transaction that writes as one script by vote, whose calls take at most %d arguments", maxTxCallArgs))
	default:
		tx.writes = true
	}
	// Copied: the arguments may sit in the connection's read buffer.
	tx.queue = append(tx.queue, txOp{cmd: cmd, args: CopyArgs(args)})
	return Simple("QUEUED")
}

// allRead reports whether every watched key was read with GET after WATCH.
func (t *txState) allRead() bool {
	for _, w := range t.watched {
		if !w.read {
			return false
		}
	}
	return true
}

// refuse marks the transaction to abort at EXEC and answers r.
func (t *txState) refuse(r Reply) Reply {
	t.dirty = true
	return r
}

// queueLockOp queues DEL or PEXPIRE/EXPIRE of a watched key whose value
// was read after WATCH: the StackExchange.Redis lock transaction, unless
// another write joins it.
func (d *Dispatcher) queueLockOp(c *Client, cmd *Command, args [][]byte) Reply {
	op := txOp{lock: true, cmd: cmd, args: CopyArgs(args)}
	if cmd.Name != "DEL" { // PEXPIRE or EXPIRE, checked as outside MULTI
		n, unit, r := expireArgs(args)
		if r == nil && n <= 0 {
			r = Errorf("ERR invalid expire time in '%s' command", cmd.lower)
		}
		if r == nil {
			op.ttl, r = d.ttlIn(n, unit)
		}
		if r != nil {
			return c.tx.refuse(r)
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
		c.tx.watched = make(map[string]watchRead)
	}
	for _, k := range args[1:] {
		c.tx.watched[string(k)] = watchRead{}
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

// EXEC runs the transaction's script (execScript), or the queued reads
// in order, or the queued compare-and-delete / compare-and-expire, which
// answers null, like a transaction whose WATCH fired, when the key no
// longer holds the value read after WATCH on a quorum.
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
	if tx.writes {
		r := d.execScript(ctx, c, tx)
		if !covered {
			d.invalidated(c, reads)
		}
		return r
	}
	out := make(Array, 0, len(tx.queue))
	for _, op := range tx.queue {
		if !op.lock {
			var p parsedCall // a read's keys are by position, but EVAL_RO's
			if op.cmd.keys != nil {
				p = parsedCall{keys: op.cmd.keys(op.args), ok: true}
			}
			out = append(out, unwrap(op.cmd.call(d, ctx, c, op.args, p)))
			continue
		}
		key := string(op.args[1])
		token := *tx.watched[key].value
		var r Reply
		if op.ttl == 0 {
			r = d.release(ctx, key, token)
		} else {
			r = d.extendToken(ctx, key, token, op.ttl)
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

// execScript runs a transaction that writes as one script by vote, the
// way EVAL runs a client's script (runScript: the analysis, the user's
// keys, the run-time check, the vote): each queued command is a
// redis.pcall in order, its keys passed as KEYS and its other arguments
// as ARGV, so the script's text depends only on the commands and where
// their keys stand, and its analysis serves every transaction of that
// shape. Every backend runs the transaction whole; the reply is the
// array of the commands' replies, an error among them where a command
// failed (as EXEC answers), each as the command alone answers it
// (Command.reply).
func (d *Dispatcher) execScript(ctx context.Context, c *Client, tx txState) Reply {
	var src strings.Builder
	var keys, argv [][]byte
	slot := map[string]int{} // key → its place in KEYS
	key := func(k []byte) int {
		n, ok := slot[string(k)]
		if !ok {
			keys = append(keys, k)
			n = len(keys)
			slot[string(k)] = n
		}
		return n
	}
	for _, k := range slices.Sorted(maps.Keys(tx.watched)) {
		read := "false" // GET's nil
		if v := tx.watched[k].value; v != nil {
			argv = append(argv, []byte(*v))
			read = fmt.Sprintf("ARGV[%d]", len(argv))
		}
		fmt.Fprintf(&src, "if redis.pcall('GET', KEYS[%d]) ~= %s then return false end\n", key([]byte(k)), read)
	}
	queue := tx.queue
	src.WriteString("return {")
	var scripted []int // the places of the commands the script runs
	for i, op := range queue {
		if op.cmd.Flags&Local != 0 {
			continue // the proxy's own answer, at its place below
		}
		if len(scripted) > 0 {
			src.WriteString(", ")
		}
		scripted = append(scripted, i)
		src.WriteString("redis.pcall('" + op.cmd.Name + "'")
		isKey := map[string]bool{}
		for _, k := range op.cmd.keysOf(op.args, nil) {
			isKey[string(k)] = true
		}
		for _, a := range op.args[1:] {
			if !isKey[string(a)] {
				argv = append(argv, a)
				fmt.Fprintf(&src, ", ARGV[%d]", len(argv))
				continue
			}
			fmt.Fprintf(&src, ", KEYS[%d]", key(a))
		}
		src.WriteString(")")
	}
	src.WriteString("}")
	rest := append([][]byte{[]byte(strconv.Itoa(len(keys)))}, keys...)
	rest = append(rest, argv...)
	r := unwrap(d.runScript(ctx, c, d.scripts.lookup([]byte(src.String()), ""), rest, keys, byVote))
	if r == (Null{}) {
		return NullArray{} // a watched key changed: not run
	}
	got, ok := r.(Array)
	if !ok || len(got) != len(scripted) {
		return r // the transaction did not run: NOQUORUM, a refusal
	}
	out := make(Array, len(queue))
	for i, op := range queue {
		if op.cmd.Flags&Local != 0 {
			out[i] = unwrap(op.cmd.call(d, ctx, c, op.args, parsedCall{}))
		}
	}
	for j, i := range scripted {
		out[i] = got[j]
		if op := queue[i]; op.cmd.reply != nil {
			out[i] = op.cmd.reply(c, op.args, out[i])
		}
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
		if op.cmd == nil || op.cmd.Flags&Writes != 0 {
			continue
		}
		for _, k := range commandKeys(op.cmd, op.args, nil) {
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
