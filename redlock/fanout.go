package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// minCallTimeout is the floor of a node call's deadline.
const minCallTimeout = time.Millisecond

// fixedDrift is added to the drift allowance of every validity computation.
const fixedDrift = 2 * time.Millisecond

// Acquire sets key to token with the given ttl on a quorum of nodes and
// returns the lock with its validity. It returns as soon as a quorum said
// yes; the other calls finish in the background and are ignored.
//
// Failures are a *QuorumError of kind ErrHeld (a quorum is impossible and a
// quorum of nodes answered, some of them "exists"), ErrNoQuorum (more than
// N−quorum nodes failed, or a quorum granted but the validity was used up),
// or an error wrapping ctx.Err() when ctx ended first. Telling ErrHeld from
// ErrNoQuorum may take until the node deadline when nodes hang. After any
// failure the keys this call may have set are deleted in the background,
// starting as soon as the failure is certain; the caller does not wait for
// that (Close does).
func (r *Redlock) Acquire(ctx context.Context, key, token string, ttl time.Duration) (Lock, error) {
	if err := validate(key, token, ttl); err != nil {
		return Lock{}, err
	}
	if err := ctx.Err(); err != nil {
		return Lock{}, fmt.Errorf("acquire: %w", err)
	}
	set := func(ctx context.Context, n Node) (bool, error) { return n.SetNX(ctx, key, token, ttl) }
	undo := func(n Node, rep reply) {
		if rep.err == nil && !rep.ok {
			return // definite "exists": the key there is not ours
		}
		r.rollback(ctx, n, key, token)
	}
	t1 := r.now()
	f := r.launch(ctx, r.callTimeout(ttl), set, undo)
	failed := true
	defer func() { f.decide(failed) }()

	t := &tally{n: len(r.nodes), q: r.quorum}
	if err := r.await(ctx, "acquire", f, t); err != nil {
		return Lock{}, err
	}
	if !t.won() {
		return Lock{}, t.failure(ErrHeld)
	}
	validity := r.validity(ttl, t1, r.now())
	if validity <= 0 {
		qe := t.failure(ErrNoQuorum)
		qe.Kind = ErrNoQuorum
		return Lock{}, qe
	}
	failed = false
	return Lock{Key: key, Token: token, Validity: validity, Granted: t.yes}, nil
}

// Release deletes key on every node where it holds token. It returns nil
// as soon as a quorum deleted it; a *QuorumError of kind ErrNotHeld when a
// quorum is impossible and a quorum of nodes answered; or of kind
// ErrNoQuorum when more than N−quorum nodes failed. Node calls run to their
// own deadline even if ctx ends (a release is worth finishing); the call
// then returns ctx.Err() wrapped. Calls still in flight after the decision
// finish in the background.
func (r *Redlock) Release(ctx context.Context, key, token string) error {
	if err := validate(key, token, time.Millisecond); err != nil {
		return err
	}
	del := func(ctx context.Context, n Node) (bool, error) { return n.CompareAndDelete(ctx, key, token) }
	f := r.launch(ctx, r.nodeTimeout, del, nil)
	defer f.decide(false)

	t := &tally{n: len(r.nodes), q: r.quorum}
	if err := r.await(ctx, "release", f, t); err != nil {
		return err
	}
	if !t.won() {
		return t.failure(ErrNotHeld)
	}
	return nil
}

// Extend sets key's ttl on every node where it holds token and returns the
// new validity, measured from the start of this call. It fails with a
// *QuorumError of kind ErrNotHeld when a quorum is impossible and a quorum
// of nodes answered (or a quorum confirmed but the validity was used up),
// or of kind ErrNoQuorum when more than N−quorum nodes failed. Partial
// extends are not undone: the keys there simply live longer.
func (r *Redlock) Extend(ctx context.Context, key, token string, ttl time.Duration) (time.Duration, error) {
	if err := validate(key, token, ttl); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("extend: %w", err)
	}
	expire := func(ctx context.Context, n Node) (bool, error) { return n.CompareAndExpire(ctx, key, token, ttl) }
	t1 := r.now()
	f := r.launch(ctx, r.callTimeout(ttl), expire, nil)
	defer f.decide(false)

	t := &tally{n: len(r.nodes), q: r.quorum}
	if err := r.await(ctx, "extend", f, t); err != nil {
		return 0, err
	}
	if !t.won() {
		return 0, t.failure(ErrNotHeld)
	}
	validity := r.validity(ttl, t1, r.now())
	if validity <= 0 {
		qe := t.failure(ErrNotHeld)
		qe.Kind = ErrNotHeld
		return 0, qe
	}
	return validity, nil
}

func validate(key, token string, ttl time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case token == "":
		return fmt.Errorf("%w: empty token", ErrInvalid)
	case ttl < time.Millisecond:
		return fmt.Errorf("%w: ttl below 1ms", ErrInvalid)
	}
	return nil
}

// callTimeout is min(NodeTimeout, 5% of ttl), at least minCallTimeout.
func (r *Redlock) callTimeout(ttl time.Duration) time.Duration {
	d := min(r.nodeTimeout, ttl/20)
	return max(d, minCallTimeout)
}

// validity is ttl − (t2 − t1) − (ttl × drift + 2ms).
func (r *Redlock) validity(ttl time.Duration, t1, t2 time.Time) time.Duration {
	drift := time.Duration(float64(ttl)*r.drift) + fixedDrift
	return ttl - t2.Sub(t1) - drift
}

// rollback deletes key on n if it still holds token, on a context that the
// caller's cancellation cannot stop.
func (r *Redlock) rollback(parent context.Context, n Node, key, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), r.rollbackTimeout)
	defer cancel()
	if _, err := n.CompareAndDelete(ctx, key, token); err != nil {
		r.log.Warn("rollback failed", "node", n.Addr(), "key", key, "error", err)
	}
}

// reply is one node's answer.
type reply struct {
	node int
	ok   bool
	err  error
}

// flight is one fan-out in progress.
type flight struct {
	replies chan reply // buffered to the node count
	decided chan struct{}
	failed  atomic.Bool // set before decided is closed
	once    sync.Once
}

// decide records the outcome and lets the node goroutines run their undo.
// Only the first call counts.
func (f *flight) decide(failed bool) {
	f.once.Do(func() {
		f.failed.Store(failed)
		close(f.decided)
	})
}

// launch starts one goroutine per node running call with its own deadline
// d, detached from ctx's cancellation. When undo is set, each goroutine,
// after its own call returned and the operation was decided, runs undo if
// the operation failed, so an undo never overtakes its call.
func (r *Redlock) launch(ctx context.Context, d time.Duration,
	call func(context.Context, Node) (bool, error), undo func(Node, reply)) *flight {
	f := &flight{
		replies: make(chan reply, len(r.nodes)),
		decided: make(chan struct{}),
	}
	base := context.WithoutCancel(ctx)
	for i, n := range r.nodes {
		r.bg.goFunc(func() {
			cctx, cancel := context.WithTimeout(base, d)
			ok, err := call(cctx, n)
			cancel()
			rep := reply{node: i, ok: ok, err: err}
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

// await collects replies into t until a quorum said yes, or until a quorum
// is impossible and the failure can be classified; or it returns an error
// wrapping ctx.Err() when ctx ends first. As soon as a quorum is impossible
// the flight is decided as failed, so undo starts while await may still
// wait for replies to tell "no" (enough definite answers) from "no quorum"
// (too many node errors).
func (r *Redlock) await(ctx context.Context, op string, f *flight, t *tally) error {
	for !t.won() {
		if t.lost() {
			f.decide(true)
			if t.classified() {
				return nil
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		select {
		case rep := <-f.replies:
			if rep.err != nil {
				addr := r.nodes[rep.node].Addr()
				r.log.Warn("node failed", "node", addr, "op", op, "error", rep.err)
				t.fail(&NodeError{Addr: addr, Err: rep.err})
				continue
			}
			t.answer(rep.ok)
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
	return nil
}

// tally counts the replies of one fan-out.
type tally struct {
	n, q    int
	yes, no int
	errs    []error
}

func (t *tally) answer(ok bool) {
	if ok {
		t.yes++
	} else {
		t.no++
	}
}

func (t *tally) fail(err error) { t.errs = append(t.errs, err) }

func (t *tally) pending() int { return t.n - t.yes - t.no - len(t.errs) }

// won: a quorum said yes.
func (t *tally) won() bool { return t.yes >= t.q }

// lost: a quorum of yes is no longer possible.
func (t *tally) lost() bool { return t.yes+t.pending() < t.q }

// classified: a failure can be named, because a quorum gave definite
// answers or so many nodes failed that a quorum never can.
func (t *tally) classified() bool { return t.yes+t.no >= t.q || len(t.errs) > t.n-t.q }

// failure classifies a failure: ErrNoQuorum when so many nodes failed that
// fewer than a quorum could ever give a definite answer, otherwise no
// (ErrHeld or ErrNotHeld).
func (t *tally) failure(no error) *QuorumError {
	kind := no
	if len(t.errs) > t.n-t.q {
		kind = ErrNoQuorum
	}
	return &QuorumError{
		Kind:     kind,
		Answered: t.yes + t.no,
		Granted:  t.yes,
		Nodes:    t.n,
		Quorum:   t.q,
		Errs:     t.errs,
	}
}
