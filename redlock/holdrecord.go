package redlock

import (
	"context"
	"fmt"
	"time"
)

// The reads of the holds record (docs/safety.md, "Holds") are
// counted over every node that answers, quarantined ones too, and a
// quarantined node is blind: it restarted empty and knows only what was
// written to it since. What it does have (a field the repair wrote back
// with its key, a renewal since) counts as on any node; what it lacks
// counts neither for nor against. So while a majority is quarantined the
// record stays readable through the nodes that kept it:
// a hold counts when at least one node has it and, with the blind nodes
// that lack it, a quorum. A node down or loading is not asked.
//
// The quorum rule of the lock does not apply to the record: it never
// decides who holds a key (the key's copies do), only what the tier
// renews, and a renewal checks every copy it renews.

// recordReply is one node's answer to a script on the record.
type recordReply struct {
	v     any
	err   error
	blind bool // quarantined: restarted empty, it knows only what came since
}

// onRecord runs s on the record of service on every node that is up or
// quarantined, within the node timeout, and waits for all of them.
func (r *Redlock) onRecord(ctx context.Context, op string, s *Script, service string, args ...any) ([]recordReply, error) {
	return r.onRecordWith(ctx, op, func(ctx context.Context, n Node) (any, error) {
		cctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
		defer cancel()
		return n.Eval(cctx, s, holdKeys(service), args...)
	})
}

// onRecordWith runs read on every node that is up or quarantined, and
// waits for all of them (see onRecord).
func (r *Redlock) onRecordWith(ctx context.Context, op string, read func(context.Context, Node) (any, error)) ([]recordReply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out := make([]recordReply, len(r.nodes))
	done := make(chan struct{}, len(r.nodes))
	now := r.now()
	sent := 0
	for i, n := range r.nodes {
		h := r.health[i]
		h.mu.Lock()
		state, _ := h.state(now)
		h.mu.Unlock()
		switch state {
		case StateUp:
		case StateQuarantined:
			out[i].blind = true
		default:
			out[i].err = fmt.Errorf("%s: %w: %s", n.Addr(), ErrNotVoting, state)
			continue
		}
		sent++
		r.bg.Go(func() {
			defer func() { done <- struct{}{} }()
			out[i].v, out[i].err = read(context.WithoutCancel(ctx), n)
		})
	}
	for range sent {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
	return out, nil
}

// onRecordPages is onRecord for a script that reads one page of the
// record (HSCAN from the cursor it is given first, before args) and
// answers the next cursor first: each node is read page by page, each
// page within the node timeout, so that no call holds a backend for the
// whole record (a record of thousands of holds took tens of
// milliseconds in one script, past the node timeout, and every backend
// was marked down). A node's reply is its pages' items after the
// cursors, in one []any. The reads of one node are not one snapshot: a
// field changed between pages is read in either state, or twice.
func (r *Redlock) onRecordPages(ctx context.Context, op string, s *Script, service string, args ...any) ([]recordReply, error) {
	return r.onRecordWith(ctx, op, func(ctx context.Context, n Node) (any, error) {
		var items []any
		cursor := "0"
		for {
			cctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
			v, err := n.Eval(cctx, s, holdKeys(service), append([]any{cursor}, args...)...)
			cancel()
			if err != nil {
				return nil, err
			}
			page, ok := v.([]any)
			if !ok || len(page) == 0 {
				return nil, fmt.Errorf("%s: page %T", op, v)
			}
			if cursor, ok = page[0].(string); !ok {
				return nil, fmt.Errorf("%s: cursor %T", op, page[0])
			}
			items = append(items, page[1:]...)
			if cursor == "0" {
				return items, nil
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	})
}

// recordFailure is the failure of a record operation: kind, with what
// the nodes answered.
func (r *Redlock) recordFailure(kind error, replies []recordReply) *QuorumError {
	c := r.counts()
	for _, rep := range replies {
		if rep.err != nil {
			c.fail(rep.err)
		} else {
			c.answered++
		}
	}
	e := c.noQuorum()
	e.Kind = kind
	return e
}

// answered counts the replies without error.
func answered(replies []recordReply) int {
	n := 0
	for _, rep := range replies {
		if rep.err == nil {
			n++
		}
	}
	return n
}

// ScanHolds reads the record of service on every node (see above), and
// deletes on each node the fields whose key no longer holds their value
// in the copy they were written for. It returns the holds that a quorum
// of nodes record with one digest and deadline (blind nodes that lack
// one counting towards it, with at least one node that has it), for a
// key holding that value there; or ErrNoQuorum when fewer than a quorum
// answered.
func (r *Redlock) ScanHolds(ctx context.Context, service string) ([]ScannedHold, error) {
	replies, err := r.onRecordPages(ctx, "scan holds", scanHoldsScript, service)
	if err != nil {
		return nil, err
	}
	var scans [][]ScannedHold
	var blind []map[string]bool // the keys each blind node returned
	for i := range replies {
		rep := &replies[i]
		if rep.err != nil {
			continue
		}
		hs, err := decodeScan(rep.v.([]any))
		if err != nil {
			rep.err = err
			continue
		}
		scans = append(scans, hs)
		if rep.blind {
			keys := make(map[string]bool, len(hs))
			for _, h := range hs {
				keys[h.Key] = true
			}
			blind = append(blind, keys)
		}
	}
	if len(scans) < r.quorum {
		return nil, r.recordFailure(ErrNoQuorum, replies)
	}
	return agreedHolds(scans, blind, r.quorum), nil
}

// agreedHolds are the holds the scans agree on (key, deadline, digest):
// found on at least one node and, with the blind nodes that lack the key,
// on q. Lease is the need-th longest PTTL of those that have it, need
// being q less those blind nodes.
func agreedHolds(scans [][]ScannedHold, blind []map[string]bool, q int) []ScannedHold {
	type same struct {
		key, digest string
		deadline    int64
	}
	seen := map[same][]time.Duration{}
	var order []same
	for _, scan := range scans {
		for _, h := range scan {
			s := same{h.Key, h.Digest, h.Deadline}
			if _, ok := seen[s]; !ok {
				order = append(order, s)
			}
			seen[s] = append(seen[s], h.Lease)
		}
	}
	var out []ScannedHold
	for _, s := range order {
		ttls := seen[s]
		need := q
		for _, keys := range blind {
			if !keys[s.key] {
				need--
			}
		}
		need = max(need, 1)
		if len(ttls) < need {
			continue
		}
		out = append(out, ScannedHold{
			HoldField: HoldField{Key: s.key, Deadline: s.deadline, Digest: s.digest},
			Lease:     quorumPTTL(ttls, need),
		})
	}
	return out
}
