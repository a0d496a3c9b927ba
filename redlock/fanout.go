package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
)

// The fan-out engine. Every operation is one fan-out: launch hands one
// command to every node's sender, each reply is counted by a decider
// (tally.go) as it arrives, and wait returns as soon as the decider says
// the outcome is certain; quorum is that sequence for every operation but
// an acquisition (acquireFanout, which undoes a failure). Every call of a
// fan-out has the same deadline, detached from the caller's cancellation.
//
// A RedisNode takes the command onto its pipelined connection without a
// goroutine, and its reply is counted on the connection's reader: a lock
// operation costs no goroutine and one wake-up of its caller. A timer
// takes the calls still open at the deadline as timed out; an undo of such
// a call is then queued on the same connection behind it, and the pipe
// never writes a request queued after its deadline, so the undo cannot be
// overtaken. A call that cannot be pipelined (any other Node, or no live
// connection) is owned by a goroutine that runs it with the deadline in
// its context (backend.GoSend) and alone settles it: an undo waits until
// the call returned. Either way the fan-out is held in r.bg until every
// call is settled and, for a fan-out with an undo, its outcome is decided,
// so Close waits for it.

// goSender runs each command of a plain Node in a goroutine of its own.
type goSender struct{ n Node }

func (g *goSender) Send(c *backend.Command, deadline time.Time, to backend.Target, tag int, _ bool) {
	backend.GoSend(func(ctx context.Context) (any, error) { return g.Run(ctx, c) }, deadline, to, tag)
}

// Run runs c on the Node and waits for the result: what the Node method
// returns, SetNX's as a grant, the bool of the compare calls boxed in any.
func (g *goSender) Run(ctx context.Context, c *backend.Command) (any, error) {
	switch n := g.n; c.Kind {
	case backend.CallSetNX:
		ok, ver, err := n.SetNX(ctx, c.Keys[0], c.Value, c.TTL)
		return grant{ok: ok, ver: ver}, err
	case backend.CallCAD:
		ok, err := n.CompareAndDelete(ctx, c.Keys[0], c.Value)
		return ok, err
	case backend.CallCAE:
		ok, err := n.CompareAndExpire(ctx, c.Keys[0], c.Value, c.TTL)
		return ok, err
	case backend.CallEval:
		return n.Eval(ctx, c.Script, c.Keys, c.Args...)
	default:
		return n.Do(ctx, c.Args...)
	}
}

// senderOf is how a fan-out reaches n: a backend.RedisNode pipelines,
// any other Node is wrapped in a goSender.
func senderOf(n Node) backend.Sender {
	if s, ok := n.(backend.Sender); ok {
		return s
	}
	return &goSender{n}
}

// reply is one node's answer: val when err is nil.
type reply[T any] struct {
	node int
	val  T
	err  error
}

// call is what a fan-out asks of every node: the command, and how its
// result reads as a T.
type call[T any] struct {
	cmd    backend.Command
	decode func(any) (T, error)
}

// verdict is a fan-out's decision.
type verdict uint8

const (
	outUndecided verdict = iota
	outSucceeded
	outFailed
)

// A call's state says who may take its result.
const (
	callOpen  = iota // a pipelined reply or the deadline, whichever comes first
	callTaken        // taken: later results are ignored
	callOwned        // run by a goroutine, which alone delivers it
)

// nodeCall is one node's part of a fan-out.
type nodeCall[T any] struct {
	epoch   uint64        // the node's health epoch when the call started
	state   atomic.Uint32 // callOpen, callTaken or callOwned
	skipped bool          // not called (not voting): nothing to undo
	owned   bool          // run by a goroutine (own): set before it starts
	done    bool          // under fanout.mu: rep is final
	rep     reply[T]
}

// fanout is one operation's calls to every node, in progress.
type fanout[T any] struct {
	r      *Redlock
	op     string
	cmd    backend.Command
	decode func(any) (T, error)
	undo   func(Node, reply[T])
	d      time.Duration
	start  time.Time
	timer  *time.Timer
	calls  []nodeCall[T] // in few, for up to inlineNodes nodes
	few    [inlineNodes]nodeCall[T]
	wake   chan struct{} // buffered: the caller may look again

	mu      sync.Mutex
	dec     decider[T]
	pending int  // calls not yet done
	open    bool // wait has not returned: replies feed dec
	outcome verdict
	after   func() // to run once pending is 0
	// afterOwned runs once the ownedLeft owned calls not done when it
	// was set are done (see afterOwnedCalls).
	afterOwned func()
	ownedLeft  int
	released   bool // r.bg released
}

// inlineNodes is how many nodes a fan-out holds without allocating.
const inlineNodes = 5

// launch sends c to every node with deadline d and returns the fan-out;
// dec counts the replies until wait returns. When undo is set, each node's
// call, once it is done and the fan-out is decided as failed, is undone in
// the background (never before its own call is done, so an undo cannot
// overtake it).
//
// Its caller must call wait. A fan-out launched while no other one waits
// is lone: its commands are written by this goroutine onto the idle
// backend connections (see backend.Conn.TrySend), so a lone request wakes no
// writer. Under concurrency the connection's writer batches them.
func launch[T any](r *Redlock, op string, d time.Duration, c call[T], dec decider[T], undo func(Node, reply[T])) *fanout[T] {
	lone := r.waiting.Add(1) == 1
	n := len(r.nodes)
	f := &fanout[T]{
		r: r, op: op, cmd: c.cmd, decode: c.decode,
		undo: undo, d: d, wake: make(chan struct{}, 1),
		dec: dec, pending: n, open: true,
	}
	if n > inlineNodes {
		f.calls = make([]nodeCall[T], n)
	} else {
		f.calls = f.few[:n]
	}
	f.start = time.Now()
	deadline := f.start.Add(d)
	if n == 0 {
		f.released = true // nothing to wait for
		return f
	}
	r.bg.Add()
	// A node that does not vote (health.go) is not called: its reply is
	// an immediate ErrNotVoting, and settle discards the answer of a node
	// that stopped voting during the call. Votes are taken before the
	// timer runs, so the deadline never takes such a node's call.
	for i := range r.nodes {
		epoch, err := r.vote(i)
		if err != nil {
			f.calls[i].skipped = true
			f.calls[i].state.Store(callTaken)
			f.settled(i, reply[T]{node: i, err: err})
			continue
		}
		f.calls[i].epoch = epoch
	}
	f.mu.Lock()
	if f.pending > 0 {
		f.timer = time.AfterFunc(d, f.expire)
	}
	f.mu.Unlock()
	for i, s := range r.senders {
		c := &f.calls[i]
		if c.skipped || c.state.Load() != callOpen {
			continue // not voting, or the deadline passed already (launch was descheduled)
		}
		s.Send(&f.cmd, deadline, f, i, lone)
	}
	return f
}

// quorum runs c on every node with deadline d and returns once dec is
// done, or with the caller's error: launch, wait, decide. Every operation
// but an acquisition (which undoes a failure: acquireFanout) is one call.
// afterCalls, when not nil, runs once every call is done, which may be
// after quorum returned (a release leaves the key's gate then).
func quorum[T any](r *Redlock, ctx context.Context, op string, d time.Duration, c call[T], dec decider[T], afterCalls func()) error {
	f := launch(r, op, d, c, dec, nil)
	defer f.decide(false)
	if afterCalls != nil {
		f.afterCalls(afterCalls)
	}
	return f.wait(ctx)
}

// quorumYes is quorum with a tally: nil once a quorum of nodes answered
// yes, else a *QuorumError of kind no (ErrNoQuorum when too few answered).
func (r *Redlock) quorumYes(ctx context.Context, op string, d time.Duration, c call[bool], no error) error {
	t := r.tally()
	if err := quorum(r, ctx, op, d, c, decider[bool](t), nil); err != nil {
		return err
	}
	if !t.won() {
		return t.failure(no)
	}
	return nil
}

// quorumWon is quorum with a tally of a yes-or-no answer: true once a
// quorum answered yes, false once that became impossible and a quorum
// answered, else a *QuorumError of kind ErrNoQuorum.
func (r *Redlock) quorumWon(ctx context.Context, op string, d time.Duration, c call[bool]) (bool, error) {
	t := r.tally()
	if err := quorum(r, ctx, op, d, c, decider[bool](t), nil); err != nil {
		return false, err
	}
	if !t.won() && t.short() {
		return false, t.noQuorum()
	}
	return t.won(), nil
}

// Deliver takes node i's result (see backend.Target): from its goroutine,
// or from the pipe unless the deadline took the call first.
func (f *fanout[T]) Deliver(i int, v any, err error) {
	st := &f.calls[i].state
	if st.CompareAndSwap(callOpen, callTaken) || st.CompareAndSwap(callOwned, callTaken) {
		f.take(i, v, err)
	}
}

// Own claims node i's call for the goroutine that runs it (see
// backend.Target).
func (f *fanout[T]) Own(i int) bool {
	if !f.calls[i].state.CompareAndSwap(callOpen, callOwned) {
		return false
	}
	f.calls[i].owned = true // before its goroutine starts: settled reads it there
	return true
}

// take turns node i's result, which the caller has claimed, into its
// reply: decoded, reported to the metrics and the node's health, settled.
func (f *fanout[T]) take(i int, v any, err error) {
	rep := reply[T]{node: i}
	if err == nil {
		rep.val, err = f.decode(v)
	}
	if f.r.observeCall != nil {
		f.r.observeCall(f.r.nodes[i].Addr(), time.Since(f.start), err)
	}
	rep.err = f.r.settle(i, f.calls[i].epoch, err, f.d)
	f.settled(i, rep)
}

// Spawn runs fn in a goroutine of r.bg (see backend.Target).
func (f *fanout[T]) Spawn(fn func()) { f.r.bg.Go(fn) }

// expire times out every call still open at the deadline. An owned call
// is left to its goroutine: its context has the same deadline.
func (f *fanout[T]) expire() {
	for i := range f.calls {
		if f.calls[i].state.CompareAndSwap(callOpen, callTaken) {
			f.take(i, nil, context.DeadlineExceeded)
		}
	}
}

// settled records node i's final reply: counted while the caller waits,
// undone if the fan-out failed, and once it is the last, the fan-out's
// after-work runs.
func (f *fanout[T]) settled(i int, rep reply[T]) {
	f.mu.Lock()
	c := &f.calls[i]
	c.rep, c.done = rep, true
	f.pending--
	counted := f.open
	var undo []int
	if f.outcome == outFailed && f.undo != nil && !c.skipped {
		undo = []int{i}
	}
	if counted {
		if rep.err != nil {
			f.dec.fail(&NodeError{Addr: f.r.nodes[i].Addr(), Err: rep.err})
		} else {
			f.dec.add(rep.val)
		}
		if f.dec.lost() && f.outcome == outUndecided {
			undo = f.decideLocked(outFailed) // i among them
		}
	}
	var after, afterOwned func()
	if c.owned && f.afterOwned != nil {
		if f.ownedLeft--; f.ownedLeft == 0 {
			afterOwned, f.afterOwned = f.afterOwned, nil
		}
	}
	if f.pending == 0 {
		if f.timer != nil { // nil while launch takes the votes
			f.timer.Stop()
		}
		after, f.after = f.after, nil
	}
	wake := counted && (f.pending == 0 || f.dec.done())
	f.holdUndos(undo)
	release := f.releaseLocked()
	f.mu.Unlock()

	if counted && rep.err != nil {
		f.logNodeError(i, rep.err)
	}
	f.undoAll(undo)
	if afterOwned != nil {
		afterOwned()
	}
	if after != nil {
		after()
	}
	if wake {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
	if release {
		f.r.bg.Done()
	}
}

func (f *fanout[T]) logNodeError(i int, err error) {
	addr := f.r.nodes[i].Addr()
	var re RedisError
	switch {
	case errors.Is(err, ErrNotVoting): // health.go logged why
		f.r.log.Debug("node skipped", "node", addr, "op", f.op, "error", err)
	case errors.As(err, &re): // the node answered, with an error reply
		f.r.log.Debug("node answered an error", "node", addr, "op", f.op, "error", err)
	default:
		f.r.log.Warn("node failed", "node", addr, "op", f.op, "error", err)
	}
}

// wait returns once the decider is done or every call is done, or with an
// error wrapping ctx.Err() when ctx ends first. Replies that come later are
// not counted. As soon as the decider has lost, the fan-out is decided as
// failed, so undo starts while wait may still wait for replies to tell
// "no" (enough definite answers) from "no quorum" (too many node errors).
func (f *fanout[T]) wait(ctx context.Context) error {
	defer f.r.waiting.Add(-1)
	if err := ctx.Err(); err != nil { // gave up before the first reply counted
		return f.giveUp(err)
	}
	for {
		f.mu.Lock()
		if f.pending == 0 || f.dec.done() {
			f.open = false
			f.mu.Unlock()
			return nil
		}
		f.mu.Unlock()
		select {
		case <-f.wake:
		case <-ctx.Done():
			return f.giveUp(ctx.Err())
		}
	}
}

// giveUp stops counting replies and returns the caller's error.
func (f *fanout[T]) giveUp(err error) error {
	f.mu.Lock()
	f.open = false
	f.mu.Unlock()
	return fmt.Errorf("%s: %w", f.op, err)
}

// decide records the outcome; only the first call counts. Failed, every
// call already done is undone now and every later one when it is done.
func (f *fanout[T]) decide(failed bool) {
	o := outSucceeded
	if failed {
		o = outFailed
	}
	f.mu.Lock()
	undo := f.decideLocked(o)
	f.holdUndos(undo)
	release := f.releaseLocked()
	f.mu.Unlock()
	f.undoAll(undo)
	if release {
		f.r.bg.Done()
	}
}

// decideLocked sets the outcome if undecided and returns the calls to undo.
func (f *fanout[T]) decideLocked(o verdict) []int {
	if f.outcome != outUndecided {
		return nil
	}
	f.outcome = o
	if o != outFailed || f.undo == nil {
		return nil
	}
	var undo []int
	for i := range f.calls {
		if f.calls[i].done && !f.calls[i].skipped {
			undo = append(undo, i)
		}
	}
	return undo
}

// releaseLocked reports, once, that the fan-out's background work is over:
// every call done and, with an undo, the outcome decided (undos run in
// goroutines of their own).
func (f *fanout[T]) releaseLocked() bool {
	if f.released || f.pending > 0 || f.undo != nil && f.outcome == outUndecided {
		return false
	}
	f.released = true
	return true
}

// holdUndos counts the undos about to start in r.bg while f.mu is held,
// before the fan-out can release its own hold: otherwise another goroutine
// settling the last call could release the fan-out, and Close return,
// between this one unlocking and starting its undos.
func (f *fanout[T]) holdUndos(nodes []int) {
	for range nodes {
		f.r.bg.Add()
	}
}

// undoAll starts the undos that holdUndos counted.
func (f *fanout[T]) undoAll(nodes []int) {
	for _, i := range nodes {
		rep := f.calls[i].rep
		go func() {
			defer f.r.bg.Done()
			f.undo(f.r.nodes[i], rep)
		}()
	}
}

// afterCalls runs fn once every call of the fan-out is done (replied or met
// its deadline): at once if they are, else on the goroutine that settles
// the last one.
func (f *fanout[T]) afterCalls(fn func()) {
	f.mu.Lock()
	if f.pending > 0 {
		f.after = fn
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	fn()
}

// afterOwnedCalls runs fn once every call of the fan-out that a goroutine
// runs (goSend: a node without a live pipelined connection, a full
// queue, or any other Node) is done: at once if none is left, else on the
// goroutine that settles the last one. Only launch makes a call owned, so
// it must be called after launch returned, on the goroutine that called
// it. A pipelined call needs no wait: a later command to its node is
// queued behind it on the same connection. An owned call is not ordered
// against anything sent later, so whoever must not overtake it waits.
func (f *fanout[T]) afterOwnedCalls(fn func()) {
	f.mu.Lock()
	left := 0
	for i := range f.calls {
		if f.calls[i].owned && !f.calls[i].done {
			left++
		}
	}
	if left > 0 {
		f.afterOwned, f.ownedLeft = fn, left
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	fn()
}

// decider turns the replies of one fan-out into an outcome.
type decider[T any] interface {
	// add counts a definite answer.
	add(v T)
	// fail counts a node error (a *NodeError).
	fail(err error)
	// lost reports that the operation has certainly failed, so undo may
	// start while the failure is still being classified.
	lost() bool
	// done reports that the outcome is certain and can be named.
	done() bool
}
