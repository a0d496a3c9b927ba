package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// Backend is what the relay needs of a backend: a name for logs, and a
// connection of its own, authenticated, its database selected
// (redlock.RedisNode.DialConn).
type Backend interface {
	Addr() string
	DialConn(ctx context.Context) (net.Conn, error)
}

// Timeouts of the relay's backend connections.
const (
	dialTimeout  = time.Second
	writeTimeout = 2 * time.Second
)

// SetupError is a backend's refusal of a command that sets a connection
// up (CLIENT TRACKING on a backend without it, miniredis for one).
type SetupError struct {
	Cmd string
	Err ServerError
}

func (e *SetupError) Error() string { return e.Cmd + ": " + string(e.Err) }

// bconn is one RESP3 connection to a backend. Its reader is its owner's
// (session.go, pop.go); writes may come from any goroutine. Replies that
// a writer awaits are matched in order with the queue.
type bconn struct {
	nc net.Conn
	br *bufio.Reader
	id int64 // the backend's CLIENT ID for it

	wmu    sync.Mutex // one writer at a time: a batch's queue entries and bytes stay in order
	mu     sync.Mutex // queue and closed; the reader takes only this one
	queue  []waiter   // replies expected, in order
	closed bool
}

// waiter is where an expected reply goes: ch (buffered), or fn, called
// on the reader's goroutine before it reads on — so what fn records is in
// place before any frame the backend sent after that reply is handled —
// with nil when the connection ended first. Neither: not awaited.
type waiter struct {
	ch chan any
	fn func(v any, ok bool)
}

// dial opens a connection to b, switches it to RESP3 (HELLO 3) and runs
// setup, each command of which must succeed.
func dial(ctx context.Context, b Backend, setup ...[]any) (*bconn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nc, err := b.DialConn(ctx)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	c := &bconn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10)}
	buf := resp.AppendCommand(nil, "HELLO", "3")
	for _, cmd := range setup {
		buf = resp.AppendCommand(buf, cmd...)
	}
	if _, err := nc.Write(buf); err != nil {
		nc.Close()
		return nil, err
	}
	for i := -1; i < len(setup); i++ {
		v, err := resp.Read(c.br)
		if err != nil {
			nc.Close()
			return nil, err
		}
		if se, ok := v.(ServerError); ok {
			nc.Close()
			name := "HELLO 3"
			if i >= 0 {
				name = fmt.Sprint(setup[i]...)
			}
			return nil, &SetupError{Cmd: name, Err: se}
		}
		if i == -1 {
			c.id = helloID(v)
		}
	}
	_ = nc.SetDeadline(time.Time{})
	return c, nil
}

// helloID is the "id" field of HELLO's reply.
func helloID(v any) int64 {
	kv, _ := v.([]any)
	for i := 0; i+1 < len(kv); i += 2 {
		if k, _ := str(kv[i]); k == "id" {
			id, _ := kv[i+1].(int64)
			return id
		}
	}
	return 0
}

// errClosed is what a waiter gets when the connection ended first.
var errClosed = errors.New("backend connection closed")

// send writes an encoded command whose replies nobody awaits, counting
// replies of them in the queue (0 for commands answered by pushes only).
func (c *bconn) send(b []byte, replies int) error {
	return c.write(b, replies, waiter{})
}

// call writes an encoded batch of commands that yields replies replies and
// returns a channel that receives the last of them (an error reply as a
// ServerError), or is closed if the connection ends first.
func (c *bconn) call(b []byte, replies int) (<-chan any, error) {
	ch := make(chan any, 1)
	return ch, c.write(b, replies, waiter{ch: ch})
}

// callFunc is call with the last reply handed to fn on the reader's
// goroutine (see waiter).
func (c *bconn) callFunc(b []byte, replies int, fn func(v any, ok bool)) error {
	return c.write(b, replies, waiter{fn: fn})
}

func (c *bconn) write(b []byte, replies int, last waiter) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	for i := range replies {
		w := waiter{}
		if i == replies-1 {
			w = last
		}
		c.queue = append(c.queue, w)
	}
	c.mu.Unlock()
	// Enqueued before written, so the reply finds its waiter; wmu keeps
	// one batch whole and the queue in the order of the bytes.
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.close()
		return err
	}
	return nil
}

// reply hands a reply to its waiter; false when none was awaited (the
// reader then treats it as its role says).
func (c *bconn) reply(v any) bool {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.mu.Unlock()
		return false
	}
	w := c.queue[0]
	c.queue[0] = waiter{}
	c.queue = c.queue[1:]
	c.mu.Unlock()
	switch {
	case w.ch != nil:
		w.ch <- v
	case w.fn != nil:
		w.fn(v, true)
	}
	return true
}

// isClosed reports a connection closed by close.
func (c *bconn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// close closes the connection and wakes every waiter.
func (c *bconn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	_ = c.nc.Close()
	queue := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, w := range queue {
		switch {
		case w.ch != nil:
			close(w.ch)
		case w.fn != nil:
			w.fn(nil, false)
		}
	}
}

// await waits for a reply channel from call, for ctx, or for d.
func await(ctx context.Context, ch <-chan any, d time.Duration) (any, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			return nil, errClosed
		}
		if se, isErr := v.(ServerError); isErr {
			return nil, se
		}
		return v, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, context.DeadlineExceeded
	}
}
