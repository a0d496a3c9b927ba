package relay

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// Blocking pops as wake-up signals (python-redis-lock: BLPOP
// lock-signal:<name>), whose push reaches every backend: each holds a
// copy. Pop blocks on every backend, on connections of its own, answers
// the first element popped and cancels the others (CLIENT UNBLOCK, so a
// pop already served is still read): an element equal to the answer is a
// copy, consumed with it; another is pushed back where it was (LPUSH for
// a pop from the head, RPUSH from the tail). A copy that arrives after
// the cancel stays: it wakes a later waiter once for nothing, never a
// safety issue (waking is only a hint to try the lock again).

// ErrTooFewBackends: a blocking pop could not start on a quorum of
// backends.
var ErrTooFewBackends = errors.New("too few backends reachable for a blocking pop")

// PopRequest is one blocking pop.
type PopRequest struct {
	Keys  []string // tried in order on each backend, as BLPOP does
	Right bool     // from the tail (BRPOP)
	// Timeout bounds the wait; 0 waits until an element comes, ctx ends
	// or Cancel is closed.
	Timeout time.Duration
	// Cancel, when closed, ends the wait as ctx would (the client left).
	Cancel <-chan struct{}
}

// Popped is the element a Pop returns.
type Popped struct {
	Key, Value string
}

// popGrace is how long past its timeout a pop waits for a backend that
// did not answer, and how long a cancellation waits for CLIENT UNBLOCK.
const popGrace = time.Second

// maxIdlePops bounds the idle pop connections kept per backend.
const maxIdlePops = 8

// Pop waits for an element on any of req.Keys on any backend. It returns
// ok false when the timeout passed with none, ctx's error when ctx ended
// first or Cancel was closed (nothing is then taken from the lists:
// what was popped meanwhile is pushed back), ErrTooFewBackends when
// fewer than a quorum of backends could be reached, the ServerError a
// quorum of them answered (WRONGTYPE: the key is of another type), and
// ErrClosed when the relay shut down. Past MaxPops pops at once it is refused with a
// *LimitError (LimitPops) and takes no connection.
func (r *Relay) Pop(ctx context.Context, req PopRequest) (Popped, bool, error) {
	if r.closed.Load() {
		return Popped{}, false, ErrClosed
	}
	n := len(r.pops)
	if n == 0 {
		return Popped{}, false, ErrTooFewBackends
	}
	if k := r.popping.Add(1); k > r.maxPops {
		r.popping.Add(-1)
		r.refused.count(LimitPops)
		return Popped{}, false, &LimitError{Limit: LimitPops, Max: int(r.maxPops), Want: int(k)}
	}
	results := make(chan popResult, n)
	calls := make([]*popCall, n)
	for i, p := range r.pops {
		pc := &popCall{i: i, pool: p, started: make(chan struct{}), ended: make(chan struct{})}
		calls[i] = pc
		r.bg.Go(func() { pc.run(r.ctx, req, results) })
	}
	var limit <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout + popGrace)
		defer t.Stop()
		limit = t.C
	}
	var win *popResult
	var err error
	failed, done := 0, 0
	refusals := map[ServerError]int{} // the backends' error replies (WRONGTYPE), by text
wait:
	for done < n {
		select {
		case res := <-results:
			done++
			calls[res.i].result = &res
			var se ServerError
			switch {
			case errors.As(res.err, &se):
				failed++
				if refusals[se]++; refusals[se] >= r.quorum {
					err = se // a quorum's answer: the key is of another type
					break wait
				}
				if failed > n-r.quorum {
					err = ErrTooFewBackends
					break wait
				}
			case res.err != nil:
				failed++
				if failed > n-r.quorum {
					err = ErrTooFewBackends
					break wait
				}
			case res.ok:
				win = &res
				break wait
			}
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-r.ctx.Done(): // Shutdown: finishPop unblocks the calls
			err = ErrClosed
			break wait
		case <-req.Cancel:
			err = context.Canceled
			break wait
		case <-limit:
			break wait
		}
	}
	r.bg.Go(func() {
		defer r.popping.Add(-1) // its connections are back, or closed
		r.finishPop(req, calls, results, n-done, win)
	})
	if errors.Is(err, ErrTooFewBackends) && r.closed.Load() {
		err = ErrClosed // the backends' calls failed because Shutdown ended them
	}
	if err != nil {
		return Popped{}, false, err
	}
	if win == nil {
		return Popped{}, false, nil
	}
	return Popped{Key: win.key, Value: win.value}, true, nil
}

// popResult is one backend's answer.
type popResult struct {
	i          int
	ok         bool
	key, value string
	err        error
}

// popCall is one backend's part of a Pop.
type popCall struct {
	i       int
	pool    *popPool
	started chan struct{} // closed once conn is set (or the call failed)
	ended   chan struct{} // closed when run has its result
	conn    *bconn
	result  *popResult
}

// run pops on one backend and reports the result.
func (pc *popCall) run(ctx context.Context, req PopRequest, out chan<- popResult) {
	res := popResult{i: pc.i}
	defer func() {
		close(pc.ended)
		out <- res
	}()
	c, err := pc.pool.get(ctx)
	if err != nil {
		close(pc.started)
		res.err = err
		return
	}
	pc.conn = c
	close(pc.started)
	cmd := "BLPOP"
	if req.Right {
		cmd = "BRPOP"
	}
	secs := strconv.FormatFloat(req.Timeout.Seconds(), 'f', 3, 64)
	var d time.Duration
	if req.Timeout > 0 {
		d = req.Timeout + popGrace
	}
	v, err := c.do(resp.AppendStrings(nil, cmd, append(append([]string(nil), req.Keys...), secs)), d)
	if err != nil {
		c.close()
		res.err = err
		return
	}
	// The connection goes back to the pool in finishPop, once no CLIENT
	// UNBLOCK can still name it.
	if se, isErr := v.(ServerError); isErr {
		res.err = se
		return
	}
	if kv, ok := v.([]any); ok && len(kv) == 2 {
		res.key, _ = str(kv[0])
		res.value, _ = str(kv[1])
		res.ok = true
	}
}

// finishPop cancels the calls still blocked, waits for them, and pushes
// back what they popped that is not a copy of the answer.
func (r *Relay) finishPop(req PopRequest, calls []*popCall, results <-chan popResult, pending int, win *popResult) {
	var unblocks sync.WaitGroup
	for _, pc := range calls {
		if pc.result == nil {
			unblocks.Go(pc.unblock)
		}
	}
	for range pending {
		res := <-results
		calls[res.i].result = &res
	}
	unblocks.Wait()
	for _, pc := range calls {
		res := pc.result
		if res.err == nil && pc.conn != nil {
			pc.pool.put(pc.conn)
		}
		if res == win || !res.ok || win != nil && res.key == win.key && res.value == win.value {
			continue
		}
		push := "LPUSH"
		if req.Right {
			push = "RPUSH"
		}
		ctx, cancel := context.WithTimeout(context.Background(), popGrace)
		if err := pc.pool.run(ctx, resp.AppendCommand(nil, push, res.key, res.value)); err != nil {
			r.log.Warn("could not push back an element popped after the answer", "backend", pc.pool.b.Addr(), "key", res.key, "error", err)
		}
		cancel()
	}
}

// unblock ends the call's blocking pop: CLIENT UNBLOCK on another
// connection makes it answer at once (its element, if it popped one, or
// nil). UNBLOCK finds nothing to unblock when the pop already answered
// (its reply is on its way) or has not reached the backend yet, so it is
// repeated, with growing pauses, until the call ends; a backend that
// cannot be told (no CLIENT UNBLOCK: miniredis), or does not end the pop
// within popGrace, has the connection closed — an element it pops then
// is lost with it.
func (pc *popCall) unblock() {
	<-pc.started
	c := pc.conn
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), popGrace)
	defer cancel()
	pause := 5 * time.Millisecond
	for {
		if err := pc.pool.run(ctx, resp.AppendCommand(nil, "CLIENT", "UNBLOCK", c.id)); err != nil {
			c.close()
			return
		}
		select {
		case <-pc.ended:
			return
		case <-time.After(pause):
			pause = min(2*pause, 200*time.Millisecond)
		case <-ctx.Done():
			c.close()
			return
		}
	}
}

// popPool keeps idle pop connections to one backend.
type popPool struct {
	b      Backend
	mu     sync.Mutex
	idle   []*bconn
	closed bool
}

func (p *popPool) get(ctx context.Context) (*bconn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return dial(ctx, p.b, nil)
}

func (p *popPool) put(c *bconn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= maxIdlePops || c.isClosed() {
		c.close()
		return
	}
	p.idle = append(p.idle, c)
}

// run sends one short command on a pooled connection.
func (p *popPool) run(ctx context.Context, cmd []byte) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	v, err := c.do(cmd, popGrace)
	if err != nil {
		c.close()
		return err
	}
	p.put(c)
	if se, isErr := v.(ServerError); isErr {
		return se
	}
	return nil
}

func (p *popPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		c.close()
	}
	p.idle = nil
}
