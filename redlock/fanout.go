package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The fan-out engine. Every operation is one flight: launch starts one
// goroutine per node, each call with its own deadline detached from the
// caller's cancellation, and await feeds the replies to a decider (see
// tally.go) until the decider says the outcome is certain. Replies go to a
// channel buffered to the node count, so an early decision never strands
// a sender; the goroutines belong to r.bg, so Close can wait for them.

// reply is one node's answer: val when err is nil.
type reply[T any] struct {
	node int
	val  T
	err  error
}

// flight is one fan-out in progress.
type flight[T any] struct {
	replies chan reply[T] // buffered to the node count
	decided chan struct{}
	failed  atomic.Bool // set before decided is closed
	once    sync.Once
	calls   sync.WaitGroup // node calls still running
}

// afterCalls runs fn, in the background, once every node call of the
// flight has returned (or met its deadline).
func (f *flight[T]) afterCalls(r *Redlock, fn func()) {
	r.bg.Go(func() {
		f.calls.Wait()
		fn()
	})
}

// decide records the outcome and lets the node goroutines run their undo.
// Only the first call counts.
func (f *flight[T]) decide(failed bool) {
	f.once.Do(func() {
		f.failed.Store(failed)
		close(f.decided)
	})
}

// launch starts one goroutine per node running call with its own deadline
// d, detached from ctx's cancellation. When undo is set, each goroutine,
// after its own call returned and the operation was decided, runs undo if
// the operation failed, so an undo never overtakes its call.
func launch[T any](r *Redlock, ctx context.Context, d time.Duration,
	call func(context.Context, Node) (T, error), undo func(Node, reply[T])) *flight[T] {
	f := &flight[T]{
		replies: make(chan reply[T], len(r.nodes)),
		decided: make(chan struct{}),
	}
	// One deadline for every node call of the flight, detached from the
	// caller's cancellation; released when the last call returned.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	var left atomic.Int32
	left.Store(int32(len(r.nodes)))
	done := func() {
		f.calls.Done()
		if left.Add(-1) == 0 {
			cancel()
		}
	}
	if len(r.nodes) == 0 {
		cancel()
	}
	for i, n := range r.nodes {
		// A node that does not vote (health.go) is not called: its reply
		// is an immediate ErrNotVoting, and settle discards the answer of
		// a node that stopped voting during the call.
		f.calls.Add(1)
		epoch, err := r.vote(i)
		if err != nil {
			f.replies <- reply[T]{node: i, err: err}
			done()
			continue
		}
		r.bg.Go(func() {
			var start time.Time
			if r.observeCall != nil {
				start = time.Now()
			}
			v, err := call(cctx, n)
			done()
			if r.observeCall != nil {
				r.observeCall(n.Addr(), time.Since(start), err)
			}
			err = r.settle(i, epoch, err, d)
			rep := reply[T]{node: i, val: v, err: err}
			f.replies <- rep
			if undo == nil {
				return
			}
			<-f.decided
			if f.failed.Load() {
				undo(n, rep)
			}
		})
	}
	return f
}

// decider turns the replies of one flight into an outcome.
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

// await feeds replies to d until d is done or every node replied, or it
// returns an error wrapping ctx.Err() when ctx ends first. As soon as d has
// lost, the flight is decided as failed, so undo starts while await may
// still wait for replies to tell "no" (enough definite answers) from
// "no quorum" (too many node errors). Node errors are logged here.
func await[T any](r *Redlock, ctx context.Context, op string, f *flight[T], d decider[T]) error {
	for range r.nodes {
		if d.lost() {
			f.decide(true)
		}
		if d.done() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		select {
		case rep := <-f.replies:
			if rep.err != nil {
				addr := r.nodes[rep.node].Addr()
				if errors.Is(rep.err, ErrNotVoting) { // health.go logged why
					r.log.Debug("node skipped", "node", addr, "op", op, "error", rep.err)
				} else {
					r.log.Warn("node failed", "node", addr, "op", op, "error", rep.err)
				}
				d.fail(&NodeError{Addr: addr, Err: rep.err})
				continue
			}
			d.add(rep.val)
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
	if d.lost() {
		f.decide(true)
	}
	return nil
}
