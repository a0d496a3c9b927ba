package proxy

import (
	"errors"
	"net"
	"os"
	"runtime"
	"sync"

	"github.com/redlock-proxy/redlock-proxy/commands"
)

// A connection's commands run concurrently and are answered in arrival
// order, as docs/commands.md ("Pipelining") says. Its goroutine reads the
// socket (through the guard: input.go) and dispatches each command as
// commands.Plan says: with nothing in flight, a command that needs no
// other goroutine runs on the reader itself, at no extra cost; otherwise
// it gets a slot in the reply queue and a worker (workers.go), which waits
// for the last barrier and the earlier commands on its keys (epochs
// below), runs it and completes its slot. A barrier that changes the
// connection's state also stops the reader until it has run. Completed
// replies are written in queue order by whichever goroutine finds the head
// complete; past maxPipeline open slots the reader stops reading, and
// while commands run it keeps reading, so a client that goes away is
// noticed at once (lease.ErrOwnerGone).

// defaultMaxPipeline is Config.MaxPipeline when unset.
const defaultMaxPipeline = 1024

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	g      *guardConn
	client *commands.Client
	in     *commandReader
	max    int

	// Dispatch state, the reader's only.
	cur     *epoch
	keyTail map[string]*slot // last slot on each key in the current epoch

	mu      sync.Mutex
	head    *slot // oldest slot whose reply is not yet in out
	tail    *slot
	open    int        // slots not yet written
	room    *sync.Cond // signalled when open drops
	out     []byte     // replies ready, in order, not yet written
	outN    int        // slots whose replies are in out
	writing bool       // a goroutine is writing out
	broken  bool       // a write failed: the connection is closing

	pushes pushState // out-of-band messages (push.go)
}

// slot is one command's place in the reply queue.
type slot struct {
	done  chan struct{} // closed when reply is set
	reply []byte        // encoded for the client's protocol
	next  *slot
	keys  []string // its entries in keyTail
	quit  bool     // QUIT: close once written
	after *[]byte  // pushes produced while it was the last slot, written after its reply (a pointer: the slot stays in its size class)
}

// epoch is a barrier and the commands after it, up to the next barrier.
// The next barrier waits for done: every slot of the epoch completed.
type epoch struct {
	barrier *slot // nil for the first epoch
	open    int   // slots of the epoch not completed (under conn.mu)
	sealed  bool  // a later barrier ended the epoch (under conn.mu)
	done    chan struct{}
}

func newConn(s *Server, nc net.Conn, client *commands.Client) *conn {
	g, ok := nc.(*guardConn)
	if !ok { // a connection a test made: the default limits
		auth, pre := scanLimits(Limits{})
		g = newGuardConn(nc, auth, pre, 0)
		nc = g
	}
	c := &conn{s: s, nc: nc, g: g, client: client, in: newCommandReader(g), max: s.cfg.MaxPipeline}
	if c.max <= 0 {
		c.max = defaultMaxPipeline
	}
	c.room = sync.NewCond(&c.mu)
	c.cur = &epoch{done: make(chan struct{})}
	return c
}

// serve reads and dispatches commands until the client leaves, QUIT, a
// protocol error, an idle timeout or the server closes the connection.
func (c *conn) serve() {
	// A client is idle when no command arrives for idle_timeout (at most
	// ×3/2: lazyDeadline) and none of its commands is in flight.
	beforeWait := func() {}
	if c.s.cfg.IdleTimeout > 0 {
		idle := newLazyDeadline(c.s.cfg.IdleTimeout)
		beforeWait = func() {
			if dl, ok := idle.next(); ok {
				_ = c.nc.SetReadDeadline(dl)
				idle.set(dl)
			}
		}
	}
	for {
		err := c.in.run(c.dispatch, beforeWait)
		if err == nil {
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && c.busy() {
			continue // not idle: its commands are still running
		}
		var perr *ProtocolError
		if errors.As(err, &perr) {
			c.drain() // the replies to the commands before the bad frame first
			c.g.refuse(perr)
		}
		return
	}
}

// dispatch runs or starts one command; last says it is the last one read.
// It reports false when the connection must close (QUIT, a write failure,
// shutdown).
func (c *conn) dispatch(args [][]byte, last bool) bool {
	// Counted before the check, so that a Shutdown that found nothing in
	// flight never sees this command start.
	c.s.inflight.Add()
	if c.s.closing.Load() {
		c.s.inflight.Done()
		c.writeDirect(commands.Error("ERR server is shutting down"))
		return false
	}
	p := c.s.disp.PlanFor(c.client, args)
	if !p.Blocks && c.idle() && (p.Local || last) {
		// Nothing in flight: run it here, as a plain connection would.
		c.pushes.inline.Store(true)
		reply := c.s.run(c.client, p, args)
		c.s.inflight.Done()
		c.afterRun()
		return c.writeNow(reply, last) && !c.client.CloseRequested()
	}
	if p.Blocks {
		// Replies the reader collected for its own commands go out before
		// a command that may block for long, as Redis writes before it
		// blocks a client.
		c.flush()
		c.in.recheck = true // see a close that came with it (input.go)
	}
	c.waitForRoom()
	sl := &slot{done: make(chan struct{})}
	deps, ep := c.plan(sl, p)
	c.push(sl, ep)
	// The arguments are in the reader's buffer, which the next read reuses.
	args = commands.CopyArgs(args)
	p.Rebind(args)
	c.s.work.Go(func() {
		defer c.s.inflight.Done()
		for _, d := range deps {
			<-d
		}
		reply := c.s.run(c.client, p, args)
		c.afterRun()
		c.complete(sl, ep, reply, c.client.CloseRequested())
	})
	if p.Barrier && p.Local {
		// It changes the connection's state for the next command: wait.
		<-sl.done
	}
	return !c.client.CloseRequested()
}

// afterRun applies what a command changed that the guard must know.
func (c *conn) afterRun() { c.g.SetAuthenticated(c.client.Authenticated()) }

// plan returns the channels a new slot must wait for, and its epoch; a
// barrier starts a new epoch.
func (c *conn) plan(sl *slot, p commands.Plan) ([]chan struct{}, *epoch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Barrier {
		prev := c.cur
		prev.sealed = true
		if prev.open == 0 {
			close(prev.done)
		}
		c.cur = &epoch{barrier: sl, open: 1, done: make(chan struct{})}
		clear(c.keyTail)
		return []chan struct{}{prev.done}, c.cur
	}
	ep := c.cur
	ep.open++
	var deps []chan struct{}
	if ep.barrier != nil {
		deps = append(deps, ep.barrier.done)
	}
	if len(p.Keys) > 0 && c.keyTail == nil {
		c.keyTail = make(map[string]*slot)
	}
	for _, k := range p.Keys {
		key := string(k)
		prev := c.keyTail[key]
		if prev == sl {
			continue // a key named twice (EXISTS k k)
		}
		if prev != nil {
			deps = append(deps, prev.done)
		}
		c.keyTail[key] = sl
		sl.keys = append(sl.keys, key)
	}
	return deps, ep
}

// push appends sl to the reply queue.
func (c *conn) push(sl *slot, ep *epoch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open++
	if c.tail == nil {
		c.head = sl
	} else {
		c.tail.next = sl
	}
	c.tail = sl
}

// complete records sl's reply, ends its part of the epoch, and writes
// every reply at the head of the queue that is complete.
func (c *conn) complete(sl *slot, ep *epoch, reply commands.Reply, quit bool) {
	b := commands.AppendReply(nil, reply, c.client.Proto())
	if b == nil {
		b = []byte{} // a silenced reply (CLIENT REPLY OFF): complete, and empty
	}
	c.mu.Lock()
	sl.reply, sl.quit = b, quit
	close(sl.done)
	if ep.open--; ep.open == 0 && ep.sealed {
		close(ep.done)
	}
	for _, k := range sl.keys {
		if c.keyTail[k] == sl {
			delete(c.keyTail, k)
		}
	}
	c.mu.Unlock()
	c.flush()
}

// flush moves the complete replies at the head of the queue to out and
// writes out, unless another goroutine is writing (it will write them).
func (c *conn) flush() {
	c.mu.Lock()
	quit := c.collect()
	if c.writing || len(c.out) == 0 {
		c.mu.Unlock()
		return
	}
	if c.head != nil {
		// Commands behind these are still running: yield once so that
		// those about to complete join this write (one write for many
		// replies of a pipeline instead of one each).
		c.writing = true
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		c.writing = false
		quit = c.collect() || quit
	}
	// A slot stays open until its reply is on the socket: a client that
	// does not read keeps the proxy from reading it (waitForRoom).
	c.writing = true
	for len(c.out) > 0 && !c.broken {
		buf, n := c.out, c.outN
		c.out, c.outN = nil, 0
		c.mu.Unlock()
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		if err != nil {
			c.broken = true
			c.g.hangUp()
		}
		c.open -= n
		c.room.Broadcast()
		if cap(buf) <= maxKeptBuffer && c.out == nil {
			c.out = buf[:0]
		}
		quit = c.collect() || quit
	}
	c.writing = false
	c.room.Broadcast()
	c.mu.Unlock()
	if quit {
		c.g.hangUp()
	}
}

// collect moves the complete replies at the head of the queue to out; it
// reports whether one of them was a QUIT's. Called with mu held.
func (c *conn) collect() bool {
	quit := false
	for c.head != nil && c.head.reply != nil {
		if len(c.head.reply) == 0 && c.head.after == nil {
			c.open-- // nothing to write: its slot is free now
			c.room.Broadcast()
		} else {
			c.out = append(c.out, c.head.reply...)
			c.outN++
		}
		if c.head.after != nil {
			c.out = append(c.out, *c.head.after...)
			c.pushes.after -= len(*c.head.after)
		}
		quit = quit || c.head.quit
		c.head = c.head.next
		if c.head == nil {
			c.tail = nil
		}
	}
	return quit
}

// writeNow writes a reply of the reader's own (nothing in flight), at the
// end of a batch of commands (last), or collects it for that write.
func (c *conn) writeNow(reply commands.Reply, last bool) bool {
	c.mu.Lock()
	c.out = commands.AppendReply(c.out, reply, c.client.Proto())
	c.releaseHeld()
	c.mu.Unlock()
	if last || c.client.CloseRequested() {
		c.flush()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.broken
}

// writeDirect writes one reply at once, behind what is queued.
func (c *conn) writeDirect(reply commands.Reply) {
	c.drain()
	_ = c.writeNow(reply, true)
}

// idle reports that no slot is open and nothing is being written: the
// reader may run a command itself and write its reply.
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open == 0 && !c.writing
}

// busy reports that commands are running or replies wait to be written.
func (c *conn) busy() bool { return !c.idle() }

// waitForRoom blocks the reader while maxPipeline slots are open.
func (c *conn) waitForRoom() {
	c.mu.Lock()
	for c.open >= c.max && !c.broken {
		c.room.Wait()
	}
	c.mu.Unlock()
}

// drain waits until every slot was written (or the connection broke).
func (c *conn) drain() {
	c.mu.Lock()
	for (c.open > 0 || c.writing) && !c.broken {
		c.room.Wait()
	}
	c.mu.Unlock()
}
