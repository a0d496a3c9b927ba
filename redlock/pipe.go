package redlock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// Auto-pipelining. Every lock operation sends one command to each backend,
// and many operations run at once: a pipe shares one connection among all
// of them. A writer goroutine takes whatever requests are queued (up to
// maxBatch) and writes them with one write; a reader goroutine reads the
// replies in order and hands each to its caller. So N concurrent lock
// operations cost a few syscalls per backend instead of 2N, and no caller
// waits for a pooled connection. Requests that arrive while a write is in
// flight are queued, and the writer takes them all for its next write.
//
// A request that may be written by its caller (trySend's inline: a direct
// call, or a flight launched while no other waits) and finds the
// connection idle (nothing queued, nothing unanswered) is written by its
// caller at once, so a lone request wakes no writer goroutine. One write
// at a time: the caller and the writer each hold busy while they put
// requests in flight and write them, so replies stay in the order written,
// and no request is written before one queued earlier (see tryInline).
//
// The queue and the in-flight list are channels, not a mutex's slices:
// under more runnable goroutines than cores, a sync.Mutex shared by every
// caller, the writer and the reader hands itself to a waiter that is not
// yet running and stalls the reader behind it (measured: more calls past
// their deadline under load), where a channel's send into its buffer does
// not wait.
//
// A caller waits for its reply until its own context ends; a reply that
// comes later is read and dropped, so the connection stays in step. A
// reply past the reader's bounds (resp.ErrTooDeep, resp.ErrTooLarge) is
// read whole and fails only its own request. A broken connection (a read
// error, bytes that are not RESP) fails every request in flight and is
// dialled again by the next request.

const (
	maxBatch   = 256  // requests written with one write
	queueDepth = 4096 // requests waiting for the writer
	// inlineMax bounds a command its caller writes itself. It is written
	// only when nothing awaits a reply, so the socket's buffers are empty
	// and a command this small cannot block the caller, even on a backend
	// that has stopped reading.
	inlineMax = 16 << 10
)

// Status is a simple string reply from a backend (+OK), as opposed to a
// bulk string, which reads as a string.
type Status = resp.Status

// StatusOK is the most common reply.
const StatusOK = resp.StatusOK

// RedisError is an error reply from a backend: "NOSCRIPT No matching ...".
type RedisError = resp.Error

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
	nc       net.Conn
	queue    chan *request // to the writer
	inflight chan *request // written, awaiting replies, in order
	dead     chan struct{} // closed when the connection failed
	once     sync.Once
	err      error

	busy atomic.Bool // a write is being made: by the writer or a caller
	ibuf []byte      // the command a caller writes, under busy
	// queued counts the requests sent to queue and not yet in flight (or
	// dropped): counted before the send, so a caller never finds the
	// connection idle while the writer holds a request it took.
	queued atomic.Int64
	// readerGone is set when the reader has stopped. Until then only the
	// reader takes from inflight: it pairs the reply it has read with the
	// head of inflight, and a drain that took that head meanwhile would
	// hand the reply to the next request (a reply to the wrong caller).
	readerGone atomic.Bool
}

// newPipeConn starts the writer and reader of nc.
func newPipeConn(nc net.Conn) *pipeConn {
	c := &pipeConn{
		nc:       nc,
		queue:    make(chan *request, queueDepth),
		inflight: make(chan *request, queueDepth+maxBatch),
		dead:     make(chan struct{}),
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
	return c.do(ctx, encode)
}

// doAll sends cmds in order, as one pipeline, and waits for every reply:
// the first error (an error reply, or ctx's end) is returned.
func (p *pipe) doAll(ctx context.Context, cmds ...[]any) ([]any, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	reqs := make([]*request, len(cmds))
	for i, cmd := range cmds {
		req := requestPool.Get().(*request)
		req.cmd = resp.AppendCommand(req.cmd[:0], cmd...)
		req.deadline, _ = ctx.Deadline()
		if err := c.enqueue(ctx, req); err != nil {
			return nil, err // the ones queued are answered and dropped
		}
		reqs[i] = req
	}
	out := make([]any, len(cmds))
	for i, req := range reqs {
		v, err := c.wait(ctx, req)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// do sends the command that encode appends on c and waits for its reply
// or for ctx to end.
func (c *pipeConn) do(ctx context.Context, encode func([]byte) []byte) (any, error) {
	req := requestPool.Get().(*request)
	req.cmd = encode(req.cmd[:0])
	req.deadline, _ = ctx.Deadline()
	if !c.tryInline(req) {
		if err := c.enqueue(ctx, req); err != nil {
			return nil, err
		}
	}
	return c.wait(ctx, req)
}

// enqueue hands req to the writer, waiting for room in the queue until ctx
// ends; on an error req is recycled.
func (c *pipeConn) enqueue(ctx context.Context, req *request) error {
	c.queued.Add(1)
	select {
	case c.queue <- req:
		c.strandCheck()
		return nil
	case <-c.dead:
		c.queued.Add(-1)
		requestPool.Put(req)
		return c.err
	case <-ctx.Done():
		c.queued.Add(-1)
		requestPool.Put(req)
		return ctx.Err()
	}
}

// wait waits for req's reply or for ctx to end.
func (c *pipeConn) wait(ctx context.Context, req *request) (any, error) {
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

// trySend queues req for the writer without blocking, or with inline
// writes it itself when it can (tryInline): false when the queue is full.
func (c *pipeConn) trySend(req *request, inline bool) bool {
	if inline && c.tryInline(req) {
		return true
	}
	c.queued.Add(1)
	select {
	case c.queue <- req:
		c.strandCheck()
		return true
	default:
		c.queued.Add(-1)
		return false
	}
}

// tryInline writes req on the caller when the connection is idle: nothing
// queued or held by the writer (queued), nothing unanswered (a request
// leaves inflight only once its reply was read), no write being made. So
// it is never written before a request queued earlier, and the socket has
// nothing unread in it. It reports whether it took req. A request past its
// deadline is taken and completed without being written.
func (c *pipeConn) tryInline(req *request) bool {
	if len(req.cmd) > inlineMax || c.queued.Load() > 0 || len(c.inflight) > 0 || !c.busy.CompareAndSwap(false, true) {
		return false
	}
	if c.queued.Load() > 0 || len(c.inflight) > 0 { // the writer got there first
		c.busy.Store(false)
		return false
	}
	if expired(req, time.Now()) {
		c.busy.Store(false)
		req.complete(nil, context.DeadlineExceeded)
		return true
	}
	c.ibuf = append(c.ibuf[:0], req.cmd...) // req may complete once in flight
	select {
	case c.inflight <- req: // empty: never blocks
	case <-c.dead:
		c.busy.Store(false)
		req.complete(nil, c.err)
		return true
	}
	if _, err := c.nc.Write(c.ibuf); err != nil {
		c.fail(err)
	}
	c.busy.Store(false)
	c.strandCheck()
	return true
}

// expired reports a request whose caller's deadline has passed at now.
func expired(r *request, now time.Time) bool {
	return !r.deadline.IsZero() && !now.Before(r.deadline)
}

// strandCheck fails what is queued if the connection died meanwhile: the
// writer and reader drain when it dies, and a request queued just after
// that would otherwise wait for nobody.
func (c *pipeConn) strandCheck() {
	select {
	case <-c.dead:
		c.drain()
	default:
	}
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

// isClosed reports a pipe that close closed (not a connection that
// failed: the next request dials again).
func (p *pipe) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// close closes the connection (requests in flight fail) and waits for a
// dial in progress.
func (p *pipe) close() error {
	p.mu.Lock()
	p.closed = true
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.fail(errPipeClosed)
	}
	p.dials.Wait()
	return nil
}

// fail marks the connection dead, closes it, and fails what is in flight.
func (c *pipeConn) fail(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.dead)
		_ = c.nc.Close()
	})
}

func (c *pipeConn) writeLoop() {
	var buf []byte
	batch := make([]*request, 0, maxBatch)
	for {
		var req *request
		select {
		case req = <-c.queue:
		case <-c.dead:
			c.drain()
			return
		}
		// One write at a time: wait for a caller's own write to end, and
		// hold off callers' writes until this batch is written, so that
		// nothing queued after it (an undo) is written before it.
		for !c.busy.CompareAndSwap(false, true) {
			runtime.Gosched()
		}
		// Under load (replies still outstanding on this connection), yield
		// once so that callers already running can join this batch: it
		// turns many writes into one. A lone request is written at once.
		if len(c.queue) == 0 && len(c.inflight) > 0 {
			runtime.Gosched()
		}
		// A request whose caller has given up is not sent: a backend that
		// was stalled must not run long-abandoned commands when it resumes.
		// The clock is read once the batch is taken, after each of its
		// requests was queued, so a request queued after its deadline is
		// never written: an undo queued at the deadline cannot be overtaken
		// by the call it undoes.
		buf, batch = buf[:0], batch[:0]
		for req != nil {
			batch = append(batch, req)
			req = nil
			if len(batch) < maxBatch {
				select {
				case req = <-c.queue:
				default:
				}
			}
		}
		taken := int64(len(batch))
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
		if len(batch) == 0 {
			c.queued.Add(-taken)
			c.busy.Store(false)
			continue
		}
		// Hand the batch to the reader before writing, so a fast reply
		// always finds its request.
		for _, r := range batch {
			select {
			case c.inflight <- r:
			case <-c.dead:
				r.complete(nil, c.err)
			}
		}
		c.queued.Add(-taken) // in flight now: counted there
		if _, err := c.nc.Write(buf); err != nil {
			c.fail(err)
		}
		c.busy.Store(false)
		clear(batch)
		select {
		case <-c.dead:
			c.drain()
			return
		default:
		}
		if cap(buf) > 64<<10 {
			buf = nil
		}
	}
}

// drain fails the requests that will never be answered: queued for the
// writer and, once the reader has stopped, written and awaiting a reply.
// Reader, writer and callers may all drain; each request is received once.
// Whoever puts a request in flight drains after it (strandCheck), so a
// request put there after the reader's last drain is not left waiting.
func (c *pipeConn) drain() {
	for {
		select {
		case r := <-c.queue:
			r.complete(nil, c.err)
			continue
		default:
		}
		if !c.readerGone.Load() {
			return
		}
		select {
		case r := <-c.inflight:
			r.complete(nil, c.err)
		default:
			return
		}
	}
}

func (c *pipeConn) readLoop() {
	defer func() {
		c.readerGone.Store(true)
		c.drain()
	}()
	br := bufio.NewReaderSize(c.nc, 16<<10)
	for {
		v, err := resp.Read(br)
		switch {
		case resp.Skipped(err):
			// A reply past the reader's bounds was read whole: it is its
			// caller's error, and the connection is still in step.
		case err != nil:
			c.fail(err)
			return
		}
		if e, ok := v.(error); ok { // an error reply is the call's error
			v, err = nil, e
		}
		select {
		case r := <-c.inflight: // the head: nobody else takes it while we run
			r.complete(v, err)
		case <-c.dead:
			return
		}
	}
}

func isRedisError(err error) bool {
	var re RedisError
	return errors.As(err, &re)
}
