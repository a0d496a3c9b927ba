package backend

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

const (
	maxBatch   = 256  // requests written with one write
	queueDepth = 4096 // requests waiting for the writer
	// InlineMax bounds a command its caller writes itself. It is written
	// only when nothing awaits a reply, so the socket's buffers are empty
	// and a command this small cannot block the caller, even on a backend
	// that has stopped reading.
	InlineMax = 16 << 10
)

// ErrClosed is returned for requests on a closed pipe or connection.
var ErrClosed = errors.New("backend connection closed")

// Request is one command (or several, written together) and where its
// reply goes: to To on the connection's reader goroutine when To is set
// (To then owns the request again), else to the caller waiting in Do.
type Request struct {
	Cmd      []byte    // the encoded command
	Deadline time.Time // the caller's; zero for none: not written after it
	To       Receiver
	// Replies is how many replies Cmd yields (0 counts as 1): the last is
	// delivered, the ones before it dropped.
	Replies int
	// NoReply marks commands answered by pushes only (SUBSCRIBE in
	// RESP3): written, never answered, To never called.
	NoReply bool

	done chan response // buffered: the reader never blocks on it
}

// A Receiver takes a request's reply (an error reply as a resp.Error
// error, nil for a nil reply) on the reader's goroutine: it must not block.
type Receiver interface {
	Receive(v any, err error)
}

// complete hands the reply to whoever waits for it.
func (r *Request) complete(v any, err error) {
	switch {
	case r.To != nil:
		r.To.Receive(v, err)
	case r.done != nil:
		r.done <- response{v: v, err: err}
	}
}

type response struct {
	v   any
	err error
}

var requestPool = sync.Pool{New: func() any { return &Request{done: make(chan response, 1)} }}

// Options are a Conn's optional behaviours.
type Options struct {
	// Push takes the frames no request awaits: out-of-band pushes
	// (RESP3), and replies beyond those requested. It returns false for a
	// push that is a reply after all (some servers send a subscribed
	// connection's PONG as a push); its result for a reply is ignored. It
	// runs on the reader's goroutine. A Conn with Push records when it
	// last read a frame (LastRead), and a reply past the reader's bounds
	// fails it, since it cannot tell whose that reply was.
	Push func(v any) bool
	// WriteTimeout, when set, bounds each write: a backend that stops
	// reading fails the connection.
	WriteTimeout time.Duration
}

// Conn is one live connection with its writer and reader.
type Conn struct {
	opts     Options
	nc       net.Conn
	queue    chan *Request // to the writer
	inflight chan *Request // written, awaiting replies, in order
	dead     chan struct{} // closed when the connection failed
	stopped  chan struct{} // closed when the reader has stopped (Done)
	once     sync.Once
	err      error
	lastRead atomic.Int64 // unix nanoseconds; only with opts.Push

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

// NewConn starts the writer and reader of nc, which is ready for commands
// (set up by its dialler).
func NewConn(nc net.Conn, o Options) *Conn {
	c := &Conn{
		opts:     o,
		nc:       nc,
		queue:    make(chan *Request, queueDepth),
		inflight: make(chan *Request, queueDepth+maxBatch),
		dead:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	c.lastRead.Store(time.Now().UnixNano())
	go c.writeLoop()
	go c.readLoop()
	return c
}

// Do sends the command that encode appends on c and waits for its reply
// or for ctx to end.
func (c *Conn) Do(ctx context.Context, encode func([]byte) []byte) (any, error) {
	req := requestPool.Get().(*Request)
	req.Cmd = encode(req.Cmd[:0])
	req.Deadline, _ = ctx.Deadline()
	if !c.tryInline(req) {
		if err := c.enqueue(ctx, req); err != nil {
			requestPool.Put(req)
			return nil, err
		}
	}
	return c.wait(ctx, req)
}

// DoAll sends cmds in order, as one pipeline, and waits for every reply,
// an error reply as a resp.Error value; the error is the connection's
// failure or ctx's end.
func (c *Conn) DoAll(ctx context.Context, cmds ...[]any) ([]any, error) {
	reqs := make([]*Request, len(cmds))
	for i, cmd := range cmds {
		req := requestPool.Get().(*Request)
		req.Cmd = resp.AppendCommand(req.Cmd[:0], cmd...)
		req.Deadline, _ = ctx.Deadline()
		if err := c.enqueue(ctx, req); err != nil {
			requestPool.Put(req)
			return nil, err // the ones queued are answered and dropped
		}
		reqs[i] = req
	}
	out := make([]any, len(cmds))
	for i, req := range reqs {
		v, err := c.wait(ctx, req)
		if re, ok := err.(resp.Error); ok {
			v, err = re, nil
		}
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Send queues req for the writer (never written by the caller), waiting
// for room in the queue; it fails only when the connection has failed.
func (c *Conn) Send(req *Request) error {
	return c.enqueue(context.Background(), req)
}

// enqueue hands req to the writer, waiting for room in the queue until ctx
// ends.
func (c *Conn) enqueue(ctx context.Context, req *Request) error {
	c.queued.Add(1)
	select {
	case c.queue <- req:
		c.strandCheck()
		return nil
	case <-c.dead:
		c.queued.Add(-1)
		return c.err
	case <-ctx.Done():
		c.queued.Add(-1)
		return ctx.Err()
	}
}

// wait waits for req's reply or for ctx to end.
func (c *Conn) wait(ctx context.Context, req *Request) (any, error) {
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

// TrySend queues req for the writer without blocking, or with inline
// writes it itself when it can (tryInline): false when the queue is full.
func (c *Conn) TrySend(req *Request, inline bool) bool {
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
func (c *Conn) tryInline(req *Request) bool {
	if len(req.Cmd) > InlineMax || req.NoReply || c.queued.Load() > 0 || len(c.inflight) > 0 || !c.busy.CompareAndSwap(false, true) {
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
	c.ibuf = append(c.ibuf[:0], req.Cmd...) // req may complete once in flight
	select {
	case c.inflight <- req: // empty: never blocks
	case <-c.dead:
		c.busy.Store(false)
		req.complete(nil, c.err)
		return true
	}
	if err := c.write(c.ibuf); err != nil {
		c.Fail(err)
	}
	c.busy.Store(false)
	c.strandCheck()
	return true
}

// write writes b, within Options.WriteTimeout when set.
func (c *Conn) write(b []byte) error {
	if c.opts.WriteTimeout > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
	}
	_, err := c.nc.Write(b)
	return err
}

// expired reports a request whose caller's deadline has passed at now.
func expired(r *Request, now time.Time) bool {
	return !r.Deadline.IsZero() && !now.Before(r.Deadline)
}

// strandCheck fails what is queued if the connection died meanwhile: the
// writer and reader drain when it dies, and a request queued just after
// that would otherwise wait for nobody.
func (c *Conn) strandCheck() {
	select {
	case <-c.dead:
		c.drain()
	default:
	}
}

// Done is closed once the connection has failed and its reader has
// stopped: no Push runs any more, and every request is answered.
func (c *Conn) Done() <-chan struct{} { return c.stopped }

// Err is why the connection failed (nil while it has not).
func (c *Conn) Err() error {
	select {
	case <-c.dead:
		return c.err
	default:
		return nil
	}
}

// LastRead is when the reader last read a frame (with Options.Push), or
// when the connection started.
func (c *Conn) LastRead() time.Time { return time.Unix(0, c.lastRead.Load()) }

// Alive reports a connection that has not failed.
func (c *Conn) Alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// Fail marks the connection dead, closes it, and fails what is in flight.
func (c *Conn) Fail(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.dead)
		_ = c.nc.Close()
	})
}

func (c *Conn) writeLoop() {
	var buf []byte
	batch := make([]*Request, 0, maxBatch)
	for {
		var req *Request
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
			buf = append(buf, r.Cmd...)
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
			if r.NoReply {
				continue
			}
			select {
			case c.inflight <- r:
			case <-c.dead:
				r.complete(nil, c.err)
			}
		}
		c.queued.Add(-taken) // in flight now: counted there
		if err := c.write(buf); err != nil {
			c.Fail(err)
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
func (c *Conn) drain() {
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

func (c *Conn) readLoop() {
	var head *Request // the request being answered, taken from inflight
	left := 0         // its replies still to read
	defer func() {
		if head != nil {
			head.complete(nil, c.err)
		}
		c.readerGone.Store(true)
		c.drain()
		close(c.stopped)
	}()
	push := c.opts.Push
	br := bufio.NewReaderSize(c.nc, 16<<10)
	for {
		v, err := resp.Read(br)
		switch {
		case resp.Skipped(err) && push == nil:
			// A reply past the reader's bounds was read whole: it is its
			// caller's error, and the connection is still in step.
		case err != nil:
			c.Fail(err)
			return
		}
		if push != nil {
			c.lastRead.Store(time.Now().UnixNano())
			if _, ok := v.(resp.Push); ok && push(v) {
				continue
			}
		}
		if head == nil {
			if push != nil {
				select {
				case head = <-c.inflight:
				default: // written before it, so a reply would find it
					push(v)
					continue
				}
			} else {
				select {
				case head = <-c.inflight: // nobody else takes it while we run
				case <-c.dead:
					return
				}
			}
			left = max(head.Replies, 1)
		}
		if left--; left > 0 {
			continue // an earlier reply of a batch: not awaited
		}
		if e, ok := v.(error); ok { // an error reply is the call's error
			v, err = nil, e
		}
		r := head
		head = nil
		r.complete(v, err)
	}
}
