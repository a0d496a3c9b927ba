package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// NodeReply is one node's answer to a command sent to every node: Value
// (nil for a nil reply) when Err is nil. A node marked down was not sent
// the command: its Err wraps ErrNotVoting.
type NodeReply struct {
	Addr  string
	Value any
	Err   error
}

// DoAll sends one raw command to every node that is not marked down, each
// within the node timeout, waits for all of them, and returns their
// replies in node order. It serves what is not a lock operation (PUBLISH,
// list signals), so a quarantined or loading node is sent the command
// too: quarantine is about a node's lock votes, and a message or a signal
// is not one. It decides nothing: the caller reads the replies. It
// returns ctx's error, wrapped, when the caller gave up first.
func (r *Redlock) DoAll(ctx context.Context, op string, args ...any) ([]NodeReply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out := make([]NodeReply, len(r.nodes))
	type result struct {
		i   int
		v   any
		err error
	}
	results := make(chan result, len(r.nodes))
	sent := 0
	for i, n := range r.nodes {
		out[i].Addr = n.Addr()
		if r.markedDown(i) {
			out[i].Err = fmt.Errorf("%w: down", ErrNotVoting)
			continue
		}
		sent++
		r.bg.Go(func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.nodeTimeout)
			defer cancel()
			start := time.Now()
			v, err := n.Do(cctx, args...)
			if r.observeCall != nil {
				r.observeCall(n.Addr(), time.Since(start), err)
			}
			results <- result{i, v, err}
		})
	}
	for range sent {
		select {
		case res := <-results:
			out[res.i].Value, out[res.i].Err = res.v, res.err
			var reply interface{ RedisError() } // an error reply (WRONGTYPE) is an answer
			if res.err != nil && !errors.As(res.err, &reply) {
				r.log.Warn("node failed", "node", out[res.i].Addr, "op", op, "error", res.err)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
	return out, nil
}

// markedDown reports whether node i is marked down (health.go).
func (r *Redlock) markedDown(i int) bool {
	h := r.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}
