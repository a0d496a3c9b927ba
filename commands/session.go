package commands

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// SESSION locks (LOCK … SESSION) live as long as their connection: one
// owned goroutine per lock extends it every third of its ttl, until
// max_hold; the lock is released when the connection closes or the proxy
// shuts down. A renewal that fails (no quorum, or no longer held) loses
// the lock: a RESP3 client is told at once with a push message
// [lock-lost, key, reason], a RESP2 client by an error on its next
// command naming the key.

// lockState is the Dispatcher's part that outlives commands: the registry
// of locks granted here with their waiters, and the session goroutines.
type lockState struct {
	reg       registry
	bg        redlock.Tracker // session renewals and releases
	life      context.Context // cancelled at the end of Shutdown
	stopLife  context.CancelFunc
	stopWaits chan struct{} // closed by stopWaiting
	stopOnce  sync.Once
	closing   atomic.Bool // Shutdown began: new sessions are released at once
}

func (d *Dispatcher) initLockState() {
	d.life, d.stopLife = context.WithCancel(context.Background())
	d.stopWaits = make(chan struct{})
}

// sessionReleaseTimeout bounds the release of a session lock when its
// connection closes or the proxy shuts down.
const sessionReleaseTimeout = 2 * time.Second

// Hooks are what package proxy lends a Client to reach its connection
// outside a command's reply. Either may be nil.
type Hooks struct {
	// Push writes an out-of-band RESP3 message now, between replies; it
	// reports false when the message could not be written.
	Push func(Reply) bool
	// WatchClose notices the connection closing while the connection's
	// goroutine is blocked in a command (LOCK … WAIT): onGone runs when
	// it closes. stop ends the watch and returns once it has ended.
	WatchClose func(onGone func()) (stop func())
}

// SetHooks installs the connection's hooks (proxy, at accept).
func (c *Client) SetHooks(h Hooks) { c.hooks.Store(&h) }

// Close tells the commands that the connection is gone: a blocked WAIT
// gives up. It is O(1) and safe to call more than once.
func (c *Client) Close() { c.closeOnce.Do(func() { close(c.done) }) }

// Done is closed once the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

func (c *Client) gone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// push sends an out-of-band message when the client speaks RESP3.
func (c *Client) push(r Reply) bool {
	h := c.hooks.Load()
	if h == nil || h.Push == nil || c.Proto() < 3 {
		return false
	}
	return h.Push(r)
}

// watchClose starts watching the connection for a close; the returned
// function stops it. Without a hook it does nothing.
func (c *Client) watchClose() func() {
	h := c.hooks.Load()
	if h == nil || h.WatchClose == nil {
		return func() {}
	}
	return h.WatchClose(c.Close)
}

// markLost records that key's lock was lost, for the next command on key.
func (c *Client) markLost(key, why string) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.lost == nil {
		c.lost = make(map[string]string)
	}
	if _, ok := c.lost[key]; !ok {
		c.lostN.Add(1)
	}
	c.lost[key] = why
}

// takeLost answers a command on a key whose lock this client lost (and
// was not told by a push) with -LOCKLOST, once.
func (c *Client) takeLost(cmd *Command, args [][]byte) Reply {
	if c.lostN.Load() == 0 || cmd.Key <= 0 || cmd.Key >= len(args) {
		return nil
	}
	key := string(args[cmd.Key])
	c.smu.Lock()
	defer c.smu.Unlock()
	why, ok := c.lost[key]
	if !ok {
		return nil
	}
	delete(c.lost, key)
	c.lostN.Add(-1)
	return Errorf("LOCKLOST lock '%s' was lost: %s", key, why)
}

// addSession records l among c's session locks; false when the connection
// has already closed (the caller then releases l).
func (c *Client) addSession(l *heldLock) bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.ended {
		return false
	}
	if c.sessions == nil {
		c.sessions = make(map[*heldLock]struct{})
	}
	c.sessions[l] = struct{}{}
	return true
}

func (c *Client) dropSession(l *heldLock) {
	c.smu.Lock()
	delete(c.sessions, l)
	c.smu.Unlock()
}

// endSessions marks the connection closed and returns its session locks.
func (c *Client) endSessions() []*heldLock {
	c.smu.Lock()
	defer c.smu.Unlock()
	c.ended = true
	out := make([]*heldLock, 0, len(c.sessions))
	for l := range c.sessions {
		out = append(out, l)
	}
	c.sessions = nil
	return out
}

// newSession prepares l for renewal; call it before l is registered.
func (d *Dispatcher) newSession(l *heldLock) context.Context {
	ctx, cancel := context.WithCancel(d.life)
	l.stop = cancel
	return ctx
}

// startSession begins renewing l, registered and prepared by newSession,
// for as long as its connection lives.
func (d *Dispatcher) startSession(ctx context.Context, l *heldLock) {
	if d.closing.Load() || !l.client.addSession(l) {
		d.bg.Go(func() { d.endSession(l) })
		return
	}
	d.bg.Go(func() { d.renew(ctx, l) })
}

// renew extends l every third of its ttl until it is stopped, max_hold
// passes, or an extend fails.
func (d *Dispatcher) renew(ctx context.Context, l *heldLock) {
	key := l.keys[0]
	holdUntil := l.granted.Add(d.opts.MaxHold)
	t := time.NewTimer(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.opts.MaxHold > 0 && !d.now().Before(holdUntil) {
			_, expires, _ := d.reg.state(l)
			d.log.Info("session lock reached max_hold: no longer renewed", "key", key,
				"client-id", l.client.ID, "max-hold", d.opts.MaxHold)
			t.Reset(max(expires.Sub(d.now()), 0))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			d.sessionLost(l, "max_hold reached")
			return
		}
		start := d.now()
		validity, err := d.locker.Extend(ctx, key, l.token, l.ttl)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			d.stats.extended.Add(1)
			d.reg.extended(key, l.token, start, d.now(), validity)
			t.Reset(l.ttl / 3)
			continue
		}
		d.stats.extendFailed.Add(1)
		why := "renewal did not reach a quorum"
		if errors.Is(err, redlock.ErrNotHeld) {
			why = "renewal found it no longer held"
		}
		d.log.Warn("session lock lost", "key", key, "client-id", l.client.ID, "error", err)
		d.sessionLost(l, why)
		return
	}
}

// sessionLost forgets l, tells its client, and deletes what may be left
// of it on the backends so that the next holder need not wait for its ttl.
func (d *Dispatcher) sessionLost(l *heldLock, why string) {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	key := l.keys[0]
	l.client.dropSession(l)
	if !l.client.push(Push{BulkString("lock-lost"), BulkString(key), BulkString(why)}) {
		l.client.markLost(key, why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionReleaseTimeout)
	defer cancel()
	_ = d.locker.Release(ctx, key, l.token)
	d.reg.remove(l)
}

// endSession stops renewing l and releases it.
func (d *Dispatcher) endSession(l *heldLock) {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	if l.stop != nil {
		l.stop()
	}
	key := l.keys[0]
	ctx, cancel := context.WithTimeout(context.Background(), sessionReleaseTimeout)
	defer cancel()
	switch err := d.locker.Release(ctx, key, l.token); {
	case err == nil:
		d.stats.released.Add(1)
		d.log.Debug("session lock released", "key", key, "client-id", l.client.ID)
	case errors.Is(err, redlock.ErrNotHeld):
		d.log.Debug("session lock had expired", "key", key, "client-id", l.client.ID)
	default:
		d.log.Warn("session lock release failed", "key", key, "client-id", l.client.ID, "error", err)
	}
	d.reg.remove(l)
}

// stopSession is UNLOCK of a session lock: no more renewals, and no
// release on close.
// releasing ends the renewal of a SESSION lock about to be released with
// its token, whatever command releases it (UNLOCK, DELIFEQ, DELEX, a
// transaction, a library's script), before the release is sent.
func (d *Dispatcher) releasing(key, token string) {
	if h := d.reg.byToken(key, token); h != nil && h.session {
		d.stopSession(h)
	}
}

func (d *Dispatcher) stopSession(l *heldLock) {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	if l.stop != nil {
		l.stop()
	}
	l.client.dropSession(l)
}

// closeSessions releases c's session locks in the background; called when
// the connection closes, under proxy's server lock, so it only starts work.
func (d *Dispatcher) closeSessions(c *Client) {
	c.Close()
	ls := c.endSessions()
	for _, l := range ls {
		d.bg.Go(func() { d.endSession(l) })
	}
}

// stopWaiting makes every LOCK … WAIT give up at once, and every later one
// not wait. (The proxy lets WAITs in flight finish when it shuts down,
// within shutdown_timeout; this is for whatever is left after that.)
func (d *Dispatcher) stopWaiting() {
	d.stopOnce.Do(func() { close(d.stopWaits) })
}

// Shutdown releases every SESSION lock and waits for the background work
// (renewals, releases) to end. It returns ctx.Err() when that does not
// finish in time. Call it after the proxy stopped serving; it is safe to
// call twice.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	d.stopWaiting()
	d.closing.Store(true)
	for _, l := range d.reg.snapshot() {
		if l.session {
			d.bg.Go(func() { d.endSession(l) })
		}
	}
	for _, c := range d.clients.snapshot() {
		for _, l := range c.endSessions() {
			d.bg.Go(func() { d.endSession(l) })
		}
	}
	err := d.bg.Wait(ctx)
	d.stopLife()
	return err
}
