package redlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Auto-pipelining. Every lock operation sends one command to each backend,
// and many operations run at once: a pipe shares one connection among all
// of them, and a reader goroutine reads the replies in order and hands
// each to its caller.
//
// Writes batch by design, not by luck of scheduling: at most one write is
// in progress on a connection at any time. A command that finds the
// connection idle (nothing being written, nothing awaiting a reply) is
// written at once by its caller, with no goroutine woken: a lone request
// pays no latency for batching. A command that finds a write in progress
// is appended to the pending batch and its caller returns; whoever owns
// the write hands the pending batch, when it finishes, to the writer
// goroutine, which writes everything pending with one write, and again
// for what arrived meanwhile, until nothing is pending. So the batch grows
// for as long as a write is in flight, the writer is woken once per busy
// spell rather than once per command, and N concurrent operations cost a
// few write syscalls per backend instead of N.
//
// A caller waits for its reply until its own context ends; a reply that
// comes later is read and dropped, so the connection stays in step. A
// broken connection fails every request queued or in flight (each exactly
// once, none left waiting) and is dialled again by the next request.

const (
	maxBatch   = 256  // requests written with one write
	queueDepth = 8192 // requests queued or awaiting replies on one connection
	// inlineMax bounds a command its caller writes itself. It is written
	// only when nothing else awaits a reply, so the socket's buffers are
	// empty and a command this small cannot block the caller, even on a
	// backend that has stopped reading.
	inlineMax = 16 << 10
)

// Status is a simple string reply from a backend (+OK), as opposed to a
// bulk string, which reads as a string.
type Status string

// StatusOK is the most common reply.
const StatusOK Status = "OK"

// RedisError is an error reply from a backend: "NOSCRIPT No matching ...".
type RedisError string

func (e RedisError) Error() string { return string(e) }

// RedisError marks it as a server's error reply for go-redis's helpers
// (redis.Error, redis.HasErrorPrefix), which health.go uses.
func (RedisError) RedisError() {}

// errPipeClosed is returned for requests on a closed pipe.
var errPipeClosed = errors.New("backend connection closed")

// request is one command and where its reply goes: to done, or, when node
// is set, to node.onReply on the pipe's own goroutines (a flight's call,
// see RedisNode.send); the pipe then recycles the request.
type request struct {
	cmd      []byte        // the encoded command
	deadline time.Time     // the caller's; zero for none
	done     chan response // buffered: the reader never blocks on it

	// For a flight's call: the node, the command and how it was sent,
	// and where its result goes.
	node *RedisNode
	call *command
	step step
	to   target
	tag  int
}

// complete hands the reply to whoever waits for it.
func (r *request) complete(v any, err error) {
	if r.node == nil {
		r.done <- response{v: v, err: err}
		return
	}
	r.node.onReply(r, v, err)
	r.node, r.call, r.to = nil, nil, nil
	requestPool.Put(r)
}

type response struct {
	v   any
	err error
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan response, 1)} }}

// pipe is one pipelined backend connection, dialled on first use. The
// dial runs in the background, bounded by its own timeout, and callers
// wait for it only as long as their own contexts allow: a backend that
// accepts connections but never answers (SIGSTOP) costs each caller its
// deadline, not the dial timeout.
type pipe struct {
	dial        func(ctx context.Context) (net.Conn, error)
	dialTimeout time.Duration

	live atomic.Pointer[pipeConn] // the connection, read without the lock

	mu      sync.Mutex
	conn    *pipeConn     // nil until dialled, and after a failure
	dialing chan struct{} // closed when the dial in progress ends
	dialErr error         // the last dial's error
	closed  bool
	dials   sync.WaitGroup
}

// pipeConn is one live connection with its writer and reader.
type pipeConn struct {
	nc   net.Conn
	kick chan struct{} // wakes the writer: it owns the write now
	dead chan struct{} // closed when the connection failed
	once sync.Once
	err  error

	// ibuf is the copy of the command its caller writes itself, used by
	// whoever owns the write (writing) outside the writer goroutine.
	ibuf []byte

	mu       sync.Mutex
	pending  []*request // queued, not yet written
	inflight []*request // written (or being written), not yet taken by the reader
	// unanswered counts the requests put in flight and not yet answered
	// (in inflight, or taken by the reader and not yet replied to).
	unanswered int
	writing    bool // a write is owned: by a caller, or by the woken writer
	failed     bool // dead: nothing more is queued
}

// newPipeConn starts the writer and reader of nc.
func newPipeConn(nc net.Conn) *pipeConn {
	c := &pipeConn{
		nc:   nc,
		kick: make(chan struct{}, 1),
		dead: make(chan struct{}),
	}
	go c.writeLoop()
	go c.readLoop()
	return c
}

func newPipe(dial func(ctx context.Context) (net.Conn, error), dialTimeout time.Duration) *pipe {
	return &pipe{dial: dial, dialTimeout: dialTimeout}
}

// doWith sends the command that encode appends and waits for its reply or
// for ctx to end.
func (p *pipe) doWith(ctx context.Context, encode func([]byte) []byte) (any, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	req := requestPool.Get().(*request)
	req.cmd = encode(req.cmd[:0])
	req.deadline, _ = ctx.Deadline()
	if err := c.put(req, true); err != nil {
		requestPool.Put(req)
		return nil, err
	}
	select {
	case r := <-req.done:
		requestPool.Put(req)
		return r.v, r.err
	case <-ctx.Done():
		// The reader will still deliver into req.done; the request is not
		// reused, so the late reply is simply dropped with it.
		return nil, ctx.Err()
	}
}

// ready returns the live connection, or nil while there is none.
func (p *pipe) ready() *pipeConn {
	if c := p.live.Load(); c != nil && c.alive() {
		return c
	}
	return nil
}

// errPipeFull is returned when a connection has queueDepth requests
// queued or unanswered: its backend has stopped answering.
var errPipeFull = errors.New("backend connection overloaded: too many requests awaiting replies")

// put queues req to be written; an error when the connection failed or is
// full (req is then not taken). With inline, a caller that finds the
// connection idle writes req itself, before put returns; the pipe's own
// goroutines pass false, so that the reader never blocks in a write.
func (c *pipeConn) put(req *request, inline bool) error {
	c.mu.Lock()
	switch {
	case c.failed:
		c.mu.Unlock()
		return c.err
	case len(c.pending)+c.unanswered >= queueDepth:
		c.mu.Unlock()
		return errPipeFull
	case c.writing || len(c.pending) > 0:
		// A write is in progress: join the next batch. Its owner hands
		// the batch on when the write ends.
		c.pending = append(c.pending, req)
		c.mu.Unlock()
		return nil
	case !inline || c.unanswered > 0 || len(req.cmd) > inlineMax:
		// Replies are outstanding, so more requests are likely to follow
		// at once: the writer takes this one and whatever joins it.
		c.pending = append(c.pending, req)
		c.writing = true
		c.mu.Unlock()
		c.kick <- struct{}{} // never blocks: one kick per owned write
		return nil
	}
	// Idle: write it now, on the caller.
	if expired(req, time.Now()) {
		c.mu.Unlock()
		req.complete(nil, context.DeadlineExceeded)
		return nil
	}
	c.writing = true
	c.ibuf = append(c.ibuf[:0], req.cmd...) // req may complete once it is in flight
	c.inflight = append(c.inflight, req)
	c.unanswered++
	c.mu.Unlock()
	if _, err := c.nc.Write(c.ibuf); err != nil {
		c.fail(err)
	}
	c.mu.Lock()
	if len(c.pending) > 0 && !c.failed {
		c.mu.Unlock()
		c.kick <- struct{}{} // the writer owns the write now
		return nil
	}
	c.writing = false
	c.mu.Unlock()
	return nil
}

// expired reports a request whose caller's deadline has passed at now.
func expired(r *request, now time.Time) bool {
	return !r.deadline.IsZero() && !now.Before(r.deadline)
}

// get returns the live connection, starting a dial if there is none and
// waiting for it until ctx ends.
func (p *pipe) get(ctx context.Context) (*pipeConn, error) {
	if c := p.live.Load(); c != nil && c.alive() {
		return c, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPipeClosed
	}
	if c := p.conn; c != nil && c.alive() {
		p.mu.Unlock()
		return c, nil
	}
	dialing := p.dialLocked()
	p.mu.Unlock()
	select {
	case <-dialing:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	c, err := p.conn, p.dialErr
	p.mu.Unlock()
	if c == nil || !c.alive() {
		if err == nil {
			err = errPipeClosed
		}
		return nil, err
	}
	return c, nil
}

// prime starts a dial in the background when there is no connection, so
// that the first calls find one ready.
func (p *pipe) prime() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && (p.conn == nil || !p.conn.alive()) {
		p.dialLocked()
	}
}

// dialLocked returns the channel of the dial in progress, starting one if
// there is none. p.mu is held.
func (p *pipe) dialLocked() chan struct{} {
	if p.dialing == nil {
		p.dialing = make(chan struct{})
		p.dials.Add(1)
		go p.dialNow(p.dialing)
	}
	return p.dialing
}

// dialNow dials and installs the new connection, then wakes the waiters.
func (p *pipe) dialNow(done chan struct{}) {
	defer p.dials.Done()
	ctx, cancel := context.WithTimeout(context.Background(), p.dialTimeout)
	nc, err := p.dial(ctx)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing, p.dialErr = nil, err
	defer close(done)
	if err != nil {
		return
	}
	if p.closed {
		nc.Close()
		return
	}
	c := newPipeConn(nc)
	p.conn = c
	p.live.Store(c)
}

func (c *pipeConn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// close closes the connection (requests in flight fail) and waits for a
// dial in progress.
func (p *pipe) close() error {
	p.mu.Lock()
	p.closed = true
	c := p.conn
	p.mu.Unlock()
	if c != nil { // outside p.mu: failing completes requests
		c.fail(errPipeClosed)
	}
	p.dials.Wait()
	return nil
}

// fail marks the connection dead, closes it, and fails every request
// queued or in flight. The reader fails those it has taken itself.
func (c *pipeConn) fail(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err, c.failed = err, true
		lost := append(c.inflight, c.pending...)
		c.inflight, c.pending = nil, nil
		c.mu.Unlock()
		close(c.dead)
		_ = c.nc.Close()
		for _, r := range lost {
			r.complete(nil, err)
		}
	})
}

// writeLoop writes what is pending whenever it is handed the write (kick),
// batch after batch, until nothing is pending.
func (c *pipeConn) writeLoop() {
	var buf []byte
	batch := make([]*request, 0, maxBatch)
	for {
		select {
		case <-c.kick:
		case <-c.dead:
			return
		}
		for {
			// Under load (replies still outstanding), a lone pending
			// request yields once so that callers already running can
			// join its batch.
			c.mu.Lock()
			yield := len(c.pending) == 1 && c.unanswered > 0
			c.mu.Unlock()
			if yield {
				runtime.Gosched()
			}
			var ok bool
			buf, batch, ok = c.nextBatch(buf[:0], batch[:0])
			if !ok {
				break
			}
			if len(buf) > 0 {
				if _, err := c.nc.Write(buf); err != nil {
					c.fail(err)
					return
				}
			}
			clear(batch)
			if cap(buf) > 64<<10 {
				buf = nil
			}
		}
	}
}

// nextBatch takes up to maxBatch pending requests for the writer, which
// owns the write: their commands appended to buf, the requests put in
// flight. A request whose caller has given up is not sent: a backend that
// was stalled must not run long-abandoned commands when it resumes. The
// clock is read after the batch was taken, so a request queued after its
// deadline is never written: an undo queued at the deadline cannot be
// overtaken by the call it undoes. It reports false, giving up the write,
// when nothing is pending or the connection failed.
func (c *pipeConn) nextBatch(buf []byte, batch []*request) ([]byte, []*request, bool) {
	c.mu.Lock()
	if c.failed {
		c.mu.Unlock()
		return buf, batch, false
	}
	if len(c.pending) == 0 {
		c.writing = false
		c.mu.Unlock()
		return buf, batch, false
	}
	n := min(len(c.pending), maxBatch)
	batch = append(batch, c.pending[:n]...)
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	c.mu.Unlock()

	// The batch is the writer's alone until it is in flight.
	now := time.Now()
	live := batch[:0]
	for _, r := range batch {
		if expired(r, now) {
			r.complete(nil, context.DeadlineExceeded)
			continue
		}
		buf = append(buf, r.cmd...)
		live = append(live, r)
	}
	clear(batch[len(live):])
	batch = live

	c.mu.Lock()
	if c.failed {
		c.mu.Unlock()
		for _, r := range batch {
			r.complete(nil, c.err)
		}
		return buf[:0], batch[:0], false
	}
	c.inflight = append(c.inflight, batch...)
	c.unanswered += len(batch)
	c.mu.Unlock()
	return buf, batch, true
}

// readLoop reads the replies in order and completes each request. It
// takes the requests in flight a batch at a time (one lock per batch, taken
// as it answers the last of the previous one, so that unanswered drops to
// zero as soon as it is); those it holds when the connection fails, it
// fails itself.
func (c *pipeConn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 16<<10)
	var got []*request
	next := 0
	for {
		v, err := readReply(br)
		if err != nil && !isRedisError(err) {
			c.fail(err)
			break
		}
		if next == len(got) {
			got, next = c.take(got), 0
			if len(got) == 0 {
				c.fail(errors.New("backend protocol error: a reply to no request"))
				break
			}
		}
		r := got[next]
		got[next] = nil
		next++
		if next == len(got) {
			got, next = c.take(got), 0
		}
		r.complete(v, err)
	}
	for _, r := range got[next:] {
		r.complete(nil, c.err)
	}
}

// take hands the reader the requests put in flight since it last took
// them, all of done (its previous batch) having been answered.
func (c *pipeConn) take(done []*request) []*request {
	clear(done)
	c.mu.Lock()
	c.unanswered -= len(done)
	got := c.inflight
	c.inflight = done[:0]
	c.mu.Unlock()
	return got
}

func isRedisError(err error) bool {
	var re RedisError
	return errors.As(err, &re)
}

// appendCommand encodes args as a RESP array of bulk strings.
func appendCommand(b []byte, args []any) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	return appendArgs(b, args)
}

// appendArgs appends each of args as a bulk string.
func appendArgs(b []byte, args []any) []byte {
	for _, a := range args {
		switch v := a.(type) {
		case string:
			b = appendBulk(b, v)
		case []byte:
			b = appendBulk(b, string(v))
		case int:
			b = appendBulk(b, strconv.Itoa(v))
		case int64:
			b = appendBulkInt(b, v)
		default:
			b = appendBulk(b, fmt.Sprint(v))
		}
	}
	return b
}

// appendBulkInt appends x in decimal as a bulk string.
func appendBulkInt(b []byte, x int64) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], x, 10)
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(d)), 10)
	b = append(b, '\r', '\n')
	b = append(b, d...)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// readReply reads one RESP2 reply: Status (simple string), string (bulk),
// int64, []any, nil, or a RedisError (returned as the error; inside an
// array, an element).
func readReply(br *bufio.Reader) (any, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("backend protocol error: %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		if string(body) == "OK" { // the common reply, without a copy
			return StatusOK, nil
		}
		return Status(body), nil
	case '-':
		return nil, RedisError(body)
	case ':':
		return strconv.ParseInt(string(body), 10, 64)
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 {
			return nil, fmt.Errorf("backend protocol error: bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 {
			return nil, fmt.Errorf("backend protocol error: array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(br)
			if err != nil && !isRedisError(err) {
				return nil, err
			}
			if err != nil {
				v = err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("backend protocol error: unexpected %q", line)
}
