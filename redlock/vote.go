package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Scripts by vote: a client's script that is safe to run on each master
// (its analysis says so; package commands decides) runs on every voting
// backend, and the caller gets the reply a quorum agreed on. There is no
// validity, no rollback and no fence: a partial effect (a lock taken on
// fewer than a quorum) stays until its own ttl.
//
// The combination rules, applied to the replies of every backend that
// answered within its deadline:
//
//  1. The reply's type decides first: nil, integer, status, bulk string,
//     array, error. A type a quorum of backends answered wins; none: no
//     quorum.
//  2. Then its value. Nil is nil. Status, bulk and error replies must be
//     equal on a quorum. Integers vote on their sign (negative, zero,
//     positive): a positive class answers the quorum-th largest value (a
//     remaining ttl that differs by milliseconds between masters: how long
//     a quorum holds at least that), a zero class 0, a negative class the
//     value a quorum gave exactly (negative integers are codes: -1, -2).
//     So a positive class never answers a negative number.
//  3. Arrays vote on their length, then element by element with these same
//     rules; an element without a quorum means no quorum.

// Vote runs script (its source, and its SHA1 for EVALSHA) with keys and
// args on every node, under the keys' gate, waits for every node within
// the script timeout (bounded: scriptkill.go), and returns the reply a
// quorum agreed on: nil, int64, Status, string, []any, or a RedisError
// (the script's error reply, as a value). It fails with a *QuorumError of kind ErrNoQuorum when the
// replies do not combine, and with a *ScriptTimeoutError when the script
// ran past the script timeout on enough nodes that no quorum answered.
func (r *Redlock) Vote(ctx context.Context, script *Script, keys []string, args []string) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("vote: %w", err)
	}
	keys = slices.Clone(keys)
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	run := call[any]{
		cmd:    command{kind: callEval, script: script, keys: keys, args: argv},
		decode: func(v any) (any, error) { return v, nil },
	}
	var leave func()
	if len(keys) > 0 {
		pass, err := r.gate.enter(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("vote: %w", err)
		}
		leave = pass.leave
	}
	t := &replyTally{counts: r.counts()}
	err := r.bounded(ctx, func(ctx context.Context, d time.Duration) error {
		return quorum(r, ctx, "vote", d, run, decider[any](t), leave)
	}, &t.counts)
	if err != nil {
		return nil, err
	}
	v, ok := combine(t.replies, t.q)
	if !ok {
		return nil, t.noQuorum()
	}
	return v, nil
}

// replyTally collects every node's reply; a script's error reply is a
// reply (its RedisError), a node failure is not.
type replyTally struct {
	counts
	replies []any
}

func (t *replyTally) add(v any) {
	t.answered++
	t.replies = append(t.replies, v)
}

func (t *replyTally) fail(err error) {
	var re RedisError
	if errors.As(err, &re) && !errors.Is(err, ErrNotVoting) {
		t.add(re)
		return
	}
	t.counts.fail(err)
}

// NewScriptHash is a Script for src whose SHA1 the caller already knows.
func NewScriptHash(src, sha1 string) *Script { return &Script{src: src, hash: sha1} }

// combine is the reply a quorum q of replies agrees on (see above).
func combine(replies []any, q int) (any, bool) {
	if len(replies) < q {
		return nil, false
	}
	byKind := map[replyKind][]any{}
	for _, v := range replies {
		k := kindOf(v)
		byKind[k] = append(byKind[k], v)
	}
	for k, vs := range byKind {
		if len(vs) < q {
			continue
		}
		switch k {
		case kindNil:
			return nil, true
		case kindInt:
			return combineInts(vs, q)
		case kindArray:
			return combineArrays(vs, q)
		default:
			return quorumEqual(vs, q)
		}
	}
	return nil, false
}

type replyKind uint8

const (
	kindNil replyKind = iota
	kindInt
	kindStatus
	kindBulk
	kindArray
	kindError
	kindOther
)

func kindOf(v any) replyKind {
	switch v.(type) {
	case nil:
		return kindNil
	case int64:
		return kindInt
	case Status:
		return kindStatus
	case string:
		return kindBulk
	case []any:
		return kindArray
	case RedisError:
		return kindError
	}
	return kindOther
}

// quorumEqual is the value q of vs are equal to (comparable values).
func quorumEqual(vs []any, q int) (any, bool) {
	for i, v := range vs {
		n := 0
		for _, w := range vs[i:] {
			if w == v {
				n++
			}
		}
		if n >= q {
			return v, true
		}
	}
	return nil, false
}

// combineInts votes on the sign, then: positive → the q-th largest, zero
// → 0, negative → a value q answered exactly.
func combineInts(vs []any, q int) (any, bool) {
	var neg, pos []int64
	zero := 0
	for _, v := range vs {
		switch n := v.(int64); {
		case n < 0:
			neg = append(neg, n)
		case n == 0:
			zero++
		default:
			pos = append(pos, n)
		}
	}
	switch {
	case len(pos) >= q:
		slices.SortFunc(pos, func(a, b int64) int { return cmp.Compare(b, a) })
		return pos[q-1], true
	case zero >= q:
		return int64(0), true
	case len(neg) >= q:
		anys := make([]any, len(neg))
		for i, n := range neg {
			anys[i] = n
		}
		return quorumEqual(anys, q)
	}
	return nil, false
}

// combineArrays votes on the length, then element by element.
func combineArrays(vs []any, q int) (any, bool) {
	byLen := map[int][][]any{}
	for _, v := range vs {
		a := v.([]any)
		byLen[len(a)] = append(byLen[len(a)], a)
	}
	for n, as := range byLen {
		if len(as) < q {
			continue
		}
		out := make([]any, n)
		col := make([]any, len(as))
		for i := range n {
			for j, a := range as {
				col[j] = a[i]
			}
			v, ok := combine(col, q)
			if !ok {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	}
	return nil, false
}
