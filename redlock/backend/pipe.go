package backend

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Pipe is one pipelined backend connection, dialled on first use. The
// dial runs in the background, bounded by its own timeout, and callers
// wait for it only as long as their own contexts allow: a backend that
// accepts connections but never answers (SIGSTOP) costs each caller its
// deadline, not the dial timeout.
type Pipe struct {
	dial        func(ctx context.Context) (net.Conn, error)
	dialTimeout time.Duration

	live atomic.Pointer[Conn] // the connection, read without the lock

	mu      sync.Mutex
	conn    *Conn         // nil until dialled, and after a failure
	dialing chan struct{} // closed when the dial in progress ends
	dialErr error         // the last dial's error
	closed  bool
	dials   sync.WaitGroup
}

// NewPipe returns a Pipe that dials with dial, each dial bounded by
// dialTimeout; nothing is dialled until the first request or Prime.
func NewPipe(dial func(ctx context.Context) (net.Conn, error), dialTimeout time.Duration) *Pipe {
	return &Pipe{dial: dial, dialTimeout: dialTimeout}
}

// Do sends the command that encode appends and waits for its reply or
// for ctx to end.
func (p *Pipe) Do(ctx context.Context, encode func([]byte) []byte) (any, error) {
	c, err := p.Get(ctx)
	if err != nil {
		return nil, err
	}
	return c.Do(ctx, encode)
}

// DoAll sends cmds in order, as one pipeline, and waits for every reply
// (see Conn.DoAll).
func (p *Pipe) DoAll(ctx context.Context, cmds ...[]any) ([]any, error) {
	c, err := p.Get(ctx)
	if err != nil {
		return nil, err
	}
	return c.DoAll(ctx, cmds...)
}

// Ready returns the live connection, or nil while there is none.
func (p *Pipe) Ready() *Conn {
	if c := p.live.Load(); c != nil && c.Alive() {
		return c
	}
	return nil
}

// Get returns the live connection, starting a dial if there is none and
// waiting for it until ctx ends.
func (p *Pipe) Get(ctx context.Context) (*Conn, error) {
	if c := p.live.Load(); c != nil && c.Alive() {
		return c, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if c := p.conn; c != nil && c.Alive() {
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
	if c == nil || !c.Alive() {
		if err == nil {
			err = ErrClosed
		}
		return nil, err
	}
	return c, nil
}

// Prime starts a dial in the background when there is no connection, so
// that the first calls find one ready.
func (p *Pipe) Prime() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && (p.conn == nil || !p.conn.Alive()) {
		p.dialLocked()
	}
}

// dialLocked returns the channel of the dial in progress, starting one if
// there is none. p.mu is held.
func (p *Pipe) dialLocked() chan struct{} {
	if p.dialing == nil {
		p.dialing = make(chan struct{})
		p.dials.Add(1)
		go p.dialNow(p.dialing)
	}
	return p.dialing
}

// dialNow dials and installs the new connection, then wakes the waiters.
func (p *Pipe) dialNow(done chan struct{}) {
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
	c := NewConn(nc, Options{})
	p.conn = c
	p.live.Store(c)
}

// IsClosed reports a pipe that Close closed (not a connection that
// failed: the next request dials again).
func (p *Pipe) IsClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close closes the connection (requests in flight fail) and waits for a
// dial in progress.
func (p *Pipe) Close() error {
	p.mu.Lock()
	p.closed = true
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.Fail(ErrClosed)
	}
	p.dials.Wait()
	return nil
}
