package redlock

import (
	"context"
	"fmt"
)

// ReadHold is the field of key in the record of service that a quorum of
// nodes hold alike (deadline, digest): ok false when no quorum agrees on
// one (none recorded, ended, or a field being written). It fails with
// ErrNoQuorum (a *QuorumError) when fewer than a quorum answered. A proxy
// that does not keep key reads it to answer the expiry its client asked
// for (a key held beyond max_ttl through another proxy of the tier).
func (r *Redlock) ReadHold(ctx context.Context, service, key string) (h HoldField, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return HoldField{}, false, fmt.Errorf("read hold: %w", err)
	}
	c := call[string]{
		cmd: command{kind: callDo, args: []any{"HGET", HoldsKey(service), key}},
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
		return HoldField{}, false, err
	}
	if t.answered < t.q {
		return HoldField{}, false, t.noQuorum()
	}
	same := map[string]int{}
	for _, f := range t.fields {
		p, err := parseHold(key, f)
		if err != nil {
			continue // absent, or not ours to read
		}
		s := p.field()
		if same[s]++; same[s] >= t.q {
			return p, true, nil
		}
	}
	return HoldField{}, false, nil
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
