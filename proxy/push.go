package proxy

import (
	"sync/atomic"

	"github.com/redlock-proxy/redlock-proxy/commands"
)

// Out-of-band messages: pub/sub messages, invalidations, lock-lost
// notices. They come from other goroutines (the relay's, the lease
// manager's) at any time, and must neither block them nor overtake a
// reply that should come first: a subscription's confirmation before its
// first message, a read's reply before the invalidation of what it read.
// So a push is written after the replies to every command the connection
// had read when the push was made: behind the last slot of the reply
// queue (its after), behind the reply of the command the reader is
// running itself (held), or, with nothing in flight, at once. It is
// encoded for the client's protocol (an array in RESP2, > in RESP3), and
// written by the connection's writers — a slot's completion, the reader,
// or a pusher goroutine started at the first push that finds the queue
// empty — never by the goroutine that pushed. A client that does not read
// its pushes is disconnected once maxPushBacklog bytes wait (Redis's
// pubsub output buffer hard limit).

// maxPushBacklog bounds the bytes waiting to be written to one client
// once pushes are involved.
const maxPushBacklog = 32 << 20

// pushState is a connection's push machinery; guarded by conn.mu except
// inline.
type pushState struct {
	inline  atomic.Bool // the reader is running a command itself
	held    []byte      // pushes made meanwhile, written after its reply
	after   int         // bytes of pushes behind slots (their after), not yet in out
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped bool
}

// pushOutOfBand queues an out-of-band message; false when the connection
// is closing. It never blocks on the client.
func (c *conn) pushOutOfBand(r commands.Reply) bool {
	b := commands.AppendReply(nil, r, c.client.Proto())
	c.mu.Lock()
	if c.broken || c.pushes.stopped {
		c.mu.Unlock()
		return false
	}
	wake := false
	waiting := len(c.out)
	switch {
	case c.tail != nil:
		if c.tail.after == nil {
			c.tail.after = new([]byte)
		}
		*c.tail.after = append(*c.tail.after, b...)
		c.pushes.after += len(b)
		waiting += c.pushes.after
	case c.pushes.inline.Load():
		c.pushes.held = append(c.pushes.held, b...)
		waiting += len(c.pushes.held) + c.pushes.after
	default:
		c.out = append(c.out, b...)
		waiting += len(b)
		wake = true
		c.startPusher()
	}
	if waiting > maxPushBacklog {
		c.broken = true
		c.mu.Unlock()
		c.s.log.Warn("client not reading its pushes: disconnected", "client-id", c.client.ID, "backlog-bytes", waiting)
		c.g.hangUp()
		return false
	}
	c.mu.Unlock()
	if wake {
		select {
		case c.pushes.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// startPusher starts the goroutine that writes pushes made while nothing
// was in flight. c.mu is held.
func (c *conn) startPusher() {
	if c.pushes.wake != nil {
		return
	}
	p := &c.pushes
	p.wake, p.stop, p.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go func() { // owned: stopPushes waits for it
		defer close(p.done)
		for {
			select {
			case <-p.wake:
				c.flush()
			case <-p.stop:
				return
			}
		}
	}()
}

// releaseHeld moves the pushes held during the reader's own command
// behind its reply. c.mu is held.
func (c *conn) releaseHeld() {
	if len(c.pushes.held) > 0 {
		c.out = append(c.out, c.pushes.held...)
		c.pushes.held = c.pushes.held[:0]
	}
	c.pushes.inline.Store(false)
}

// stopPushes refuses further pushes and waits for the pusher.
func (c *conn) stopPushes() {
	c.mu.Lock()
	p := &c.pushes
	p.stopped = true
	started := p.wake != nil
	c.mu.Unlock()
	if started {
		close(p.stop)
		<-p.done
	}
}
