package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
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

// onRecord runs read on every node that is up or quarantined, and
// waits for all of them: a quarantined node's reply is marked blind.
func (r *Redlock) onRecord(ctx context.Context, op string, read func(context.Context, Node) (any, error)) ([]recordReply, error) {
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

// ScanHolds reads the record of service on every node (see above), and
// deletes on each node the fields whose key no longer holds their value
// in the copy they were written for. It returns the holds that a quorum
// of nodes record with one digest and deadline (blind nodes that lack
// one counting towards it, with at least one node that has it), for a
// key holding that value there; or ErrNoQuorum when fewer than a quorum
// answered.
func (r *Redlock) ScanHolds(ctx context.Context, service string) ([]record.Scanned, error) {
	replies, err := r.onRecord(ctx, "scan holds", func(ctx context.Context, n Node) (any, error) {
		return record.Scan(ctx, n, service, r.nodeTimeout)
	})
	if err != nil {
		return nil, err
	}
	var scans [][]record.Scanned
	var blind []map[string]bool // the keys each blind node returned
	for _, rep := range replies {
		if rep.err != nil {
			continue
		}
		hs := rep.v.([]record.Scanned)
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
func agreedHolds(scans [][]record.Scanned, blind []map[string]bool, q int) []record.Scanned {
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
	var out []record.Scanned
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
		out = append(out, record.Scanned{
			Field: record.Field{Key: s.key, Deadline: s.deadline, Digest: s.digest},
			Lease: quorumPTTL(ttls, need),
		})
	}
	return out
}

// ReadHold is the field of key in the record of service that a quorum of
// nodes hold alike (deadline, digest): ok false when no quorum agrees on
// one (none recorded, ended, or a field being written). It fails with
// ErrNoQuorum (a *QuorumError) when fewer than a quorum answered. A proxy
// that does not keep key reads it to answer the expiry its client asked
// for (a key held beyond max_ttl through another proxy of the tier).
func (r *Redlock) ReadHold(ctx context.Context, service, key string) (h record.Field, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return record.Field{}, false, fmt.Errorf("read hold: %w", err)
	}
	c := call[string]{
		cmd: backend.Command{Kind: backend.CallDo, Args: []any{"HGET", record.Key(service), key}},
		decode: func(v any) (string, error) {
			switch s := v.(type) {
			case nil:
				return "", nil
			case string:
				return s, nil
			}
			return "", fmt.Errorf("read hold: reply %T", v)
		},
	}
	t := &fieldTally{counts: r.counts()}
	if err := quorum(r, ctx, "read hold", r.nodeTimeout, c, decider[string](t), nil); err != nil {
		return record.Field{}, false, err
	}
	if t.answered < t.q {
		return record.Field{}, false, t.noQuorum()
	}
	same := map[string]int{}
	for _, f := range t.fields {
		p, err := record.Parse(key, f)
		if err != nil {
			continue // absent, or not ours to read
		}
		s := p.Encode()
		if same[s]++; same[s] >= t.q {
			return p, true, nil
		}
	}
	return record.Field{}, false, nil
}

// fieldTally keeps every node's field and waits for all of them.
type fieldTally struct {
	counts
	fields []string
}

func (t *fieldTally) add(f string) {
	t.answered++
	t.fields = append(t.fields, f)
}
