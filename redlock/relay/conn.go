package relay

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
)

// Backend is what the relay needs of a backend: a name for logs, and a
// connection of its own, authenticated, its database selected
// (backend.RedisNode.DialConn).
type Backend interface {
	Addr() string
	DialConn(ctx context.Context) (net.Conn, error)
}

// writeTimeout bounds a write on the relay's backend connections (a dial
// is bounded as every backend connection's: backend.DialTimeout).
const writeTimeout = 2 * time.Second

// SetupError is a backend's refusal of a command that sets a connection
// up (CLIENT TRACKING on a backend without it, miniredis for one).
type SetupError struct {
	Cmd string
	Err ServerError
}

func (e *SetupError) Error() string { return e.Cmd + ": " + string(e.Err) }

// bconn is one RESP3 connection to a backend, on the proxy's one engine
// of backend connections (backend.Conn). Writes may come from any
// goroutine and are matched in order with their replies; the frames no
// write awaits (pushes, and replies nobody waits for) go to its owner's
// frame function (session.go) on the reader's goroutine.
type bconn struct {
	*backend.Conn
	id int64 // the backend's CLIENT ID for it
}

// waiter is where an expected reply goes: ch (buffered), or fn, called
// on the reader's goroutine before it reads on — so what fn records is in
// place before any frame the backend sent after that reply is handled —
// with nil when the connection ended first. Neither: not awaited. An
// error reply is delivered as a ServerError value.
type waiter struct {
	backend.Request
	ch chan any
	fn func(v any, ok bool)
}

func (w *waiter) Receive(v any, err error) {
	ok := true
	if se, isErr := err.(ServerError); isErr {
		v = se
	} else if err != nil {
		v, ok = nil, false
	}
	switch {
	case w.ch != nil && ok:
		w.ch <- v
	case w.ch != nil:
		close(w.ch)
	case w.fn != nil:
		w.fn(v, ok)
	}
}

// dial opens a connection to b, switches it to RESP3 (HELLO 3) and runs
// setup, each command of which must succeed. frame, when not nil, takes
// the frames no write awaits (see backend.Options.Push; a PONG sent as a
// push is a reply).
func dial(ctx context.Context, b Backend, frame func(v any), setup ...[]any) (*bconn, error) {
	ctx, cancel := context.WithTimeout(ctx, backend.DialTimeout)
	defer cancel()
	nc, err := b.DialConn(ctx)
	if err != nil {
		return nil, err
	}
	c := &bconn{}
	o := backend.Options{WriteTimeout: writeTimeout}
	if frame != nil {
		o.Push = func(v any) bool {
			if p, ok := v.(Push); ok && isPong(p) {
				return false
			}
			frame(v)
			return true
		}
	}
	c.Conn = backend.NewConn(nc, o)
	replies, err := c.DoAll(ctx, append([][]any{{"HELLO", "3"}}, setup...)...)
	if err != nil {
		c.Fail(err)
		return nil, err
	}
	for i, v := range replies {
		if se, ok := v.(ServerError); ok {
			c.Fail(backend.ErrClosed)
			name := "HELLO 3"
			if i > 0 {
				name = fmt.Sprint(setup[i-1]...)
			}
			return nil, &SetupError{Cmd: name, Err: se}
		}
	}
	c.id = helloID(replies[0])
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

// send writes an encoded command whose replies nobody awaits, counting
// replies of them (0 for commands answered by pushes only).
func (c *bconn) send(b []byte, replies int) error {
	return c.write(b, replies, &waiter{})
}

// call writes an encoded batch of commands that yields replies replies and
// returns a channel that receives the last of them (an error reply as a
// ServerError), or is closed if the connection ends first.
func (c *bconn) call(b []byte, replies int) (<-chan any, error) {
	ch := make(chan any, 1)
	return ch, c.write(b, replies, &waiter{ch: ch})
}

// callFunc is call with the last reply handed to fn on the reader's
// goroutine (see waiter).
func (c *bconn) callFunc(b []byte, replies int, fn func(v any, ok bool)) error {
	return c.write(b, replies, &waiter{fn: fn})
}

func (c *bconn) write(b []byte, replies int, w *waiter) error {
	w.Cmd, w.Replies, w.NoReply, w.To = b, replies, replies == 0, w
	if err := c.Send(&w.Request); err != nil {
		return backend.ErrClosed
	}
	return nil
}

// do writes one command and waits for its reply, within d when d > 0 (a
// pop connection's blocking pop); an error reply is a ServerError value.
func (c *bconn) do(cmd []byte, d time.Duration) (any, error) {
	ctx := context.Background()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	v, err := c.Do(ctx, func(b []byte) []byte { return append(b, cmd...) })
	if se, isErr := err.(ServerError); isErr {
		return se, nil
	}
	return v, err
}

// isClosed reports a connection that failed or was closed.
func (c *bconn) isClosed() bool { return !c.Alive() }

// close closes the connection: every waiter gets its end.
func (c *bconn) close() { c.Fail(backend.ErrClosed) }

// await waits for a reply channel from call, for ctx, or for d.
func await(ctx context.Context, ch <-chan any, d time.Duration) (any, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			return nil, backend.ErrClosed
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
