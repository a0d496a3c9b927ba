package lease

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Lists as wake-up signals (python-redis-lock waits with BLPOP on a list
// its release pushes onto), and PUBLISH. A push goes to every voting node,
// so each holds a copy of the signal; a pop takes the element most nodes
// popped and pushes any other back. Lists are not quorum data: each
// method's result is the most useful reading of the nodes' answers,
// written next to it. A node's WRONGTYPE comes back as a
// redlock.RedisError, when it is what the nodes said.

// Push pushes elems onto key on every voting node (at the tail when
// right); once a quorum acknowledged, the longest list's length.
func (m *Manager) Push(ctx context.Context, key string, right bool, elems []string) (int64, error) {
	cmd := make([]any, 0, 2+len(elems))
	cmd = append(cmd, pushCommand(right), key)
	for _, e := range elems {
		cmd = append(cmd, e)
	}
	ns, err := m.listInts(ctx, "push", cmd)
	if err != nil {
		return 0, err
	}
	return slices.Max(ns), nil
}

func pushCommand(right bool) string {
	if right {
		return "RPUSH"
	}
	return "LPUSH"
}

// Len is the length that a quorum of nodes holds at least.
func (m *Manager) Len(ctx context.Context, key string) (int64, error) {
	ns, err := m.listInts(ctx, "llen", []any{"LLEN", key})
	if err != nil {
		return 0, err
	}
	slices.Sort(ns)
	return ns[len(ns)-m.locker.Quorum()], nil
}

// listInts sends cmd to every voting node and returns the integer
// replies; fewer than a quorum: a node's WRONGTYPE, or a
// *redlock.QuorumError.
func (m *Manager) listInts(ctx context.Context, op string, cmd []any) ([]int64, error) {
	replies, err := m.locker.DoAll(ctx, op, cmd...)
	if err != nil {
		return nil, err
	}
	var ns []int64
	var said error
	for _, nr := range replies {
		if n, ok := nr.Value.(int64); ok && nr.Err == nil {
			ns = append(ns, n)
		} else if said == nil {
			said = wrongType(nr.Err)
		}
	}
	if q := m.locker.Quorum(); len(ns) < q {
		if said != nil {
			return nil, said
		}
		return nil, &redlock.QuorumError{Kind: redlock.ErrNoQuorum, Answered: len(ns), Nodes: len(replies), Quorum: q}
	}
	return ns, nil
}

// wrongType is a node's WRONGTYPE error reply as a redlock.RedisError, or
// nil for any other error (those are logged, not shown to clients).
func wrongType(err error) error {
	var re interface{ RedisError() }
	if err != nil && errors.As(err, &re) && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return redlock.RedisError(err.Error())
	}
	return nil
}

// Pop pops one element of key (from the tail when right) on every voting
// node: the element that most nodes popped (ties: the first node's), and
// false when none popped. Any other element a node popped is pushed back
// where it was. More nodes answered WRONGTYPE than popped or answered
// nil: that error; no node answered: ErrNoBackend.
func (m *Manager) Pop(ctx context.Context, key string, right bool) (string, bool, error) {
	elems, _, err := m.pop(ctx, key, right, -1)
	if err != nil || len(elems) == 0 {
		return "", false, err
	}
	return elems[0], true, nil
}

// PopCount pops up to count elements of key (LPOP key count; from the
// tail when right) on every voting node, and answers them in the order
// popped: at each place, among the nodes that popped every element
// answered before it, the element most of them popped there (ties as
// Pop's). With count 1 that is Pop's element. exists is false when no
// node holds key (Redis's null array; an empty list when count is 0 and
// some node holds key). Whatever a node popped past the elements it
// agrees on is pushed back where it was, in its order. Errors as Pop's.
func (m *Manager) PopCount(ctx context.Context, key string, right bool, count int64) (elems []string, exists bool, err error) {
	return m.pop(ctx, key, right, count)
}

// pop is Pop (count < 0: the one-element form) and PopCount.
func (m *Manager) pop(ctx context.Context, key string, right bool, count int64) ([]string, bool, error) {
	cmd := []any{"LPOP", key}
	if right {
		cmd[0] = "RPOP"
	}
	if count >= 0 {
		cmd = append(cmd, strconv.FormatInt(count, 10))
	}
	replies, err := m.locker.DoAll(ctx, "pop", cmd...)
	if err != nil {
		return nil, false, err
	}
	popped := make([][]string, len(replies)) // what each node popped
	agree := make([]int, 0, len(replies))    // the nodes that popped every element answered so far
	exists, answered, wrongs := false, 0, 0
	var said error
	for i, nr := range replies {
		if nr.Err != nil {
			if wt := wrongType(nr.Err); wt != nil {
				said, wrongs = wt, wrongs+1
			}
			continue
		}
		answered++
		var holds bool
		popped[i], holds = poppedElems(nr.Value)
		exists = exists || holds
		agree = append(agree, i)
	}
	if answered == 0 && said == nil {
		return nil, false, ErrNoBackend
	}
	// A WRONGTYPE is a node's answer too: when more nodes gave it than
	// anything else (a write not yet on every node), it is the reply, and
	// whatever the others popped goes back.
	var out []string
	for j := 0; wrongs <= answered; j++ {
		votes := map[string]int{}
		best := ""
		for _, i := range agree {
			if j < len(popped[i]) {
				s := popped[i][j]
				votes[s]++
				if votes[s] > votes[best] {
					best = s
				}
			}
		}
		if len(votes) == 0 {
			break
		}
		out = append(out, best)
		agree = slices.DeleteFunc(agree, func(i int) bool { return j >= len(popped[i]) || popped[i][j] != best })
	}
	nodes := m.locker.Nodes()
	for i, elems := range popped {
		k := 0 // the elements node i agrees on
		for k < len(elems) && k < len(out) && elems[k] == out[k] {
			k++
		}
		if k == len(elems) {
			continue
		}
		back := []any{pushCommand(right), key}
		for _, s := range slices.Backward(elems[k:]) { // the last popped goes back first
			back = append(back, s)
		}
		// Bounded like any node call: a backend that stalls after its
		// pop must not hold the client's pop forever.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.locker.NodeTimeout())
		_, err := nodes[i].Do(cctx, back...)
		cancel()
		if err != nil {
			m.log.Warn("could not push back a popped element", "node", replies[i].Addr, "key", key, "error", err)
		}
	}
	if wrongs > answered {
		return nil, false, said
	}
	return out, exists, nil
}

// poppedElems reads a node's reply to LPOP/RPOP: the elements it popped
// (a string, or an array of them with a count), and whether it answered
// an array, which says it holds the key even when the array is empty.
func poppedElems(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, false
	case []any:
		elems := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok { // not a list's element: ignore the rest
				break
			}
			elems = append(elems, s)
		}
		return elems, true
	}
	return nil, false
}

// Publish publishes message on channel (a shard channel when shard) on
// every voting node: the largest receiver count a node reported (each
// counts the subscriber connections of every proxy and its own direct
// subscribers); ErrNoBackend when no node answered.
func (m *Manager) Publish(ctx context.Context, shard bool, channel, message string) (int64, error) {
	name := "PUBLISH"
	if shard {
		name = "SPUBLISH"
	}
	replies, err := m.locker.DoAll(ctx, strings.ToLower(name), name, channel, message)
	if err != nil {
		return 0, err
	}
	most, answered := int64(0), 0
	var refused error
	for _, nr := range replies {
		n, ok := nr.Value.(int64)
		switch {
		case nr.Err == nil && ok:
			answered++
			most = max(most, n)
		case nr.Err != nil && refused == nil && !errors.Is(nr.Err, redlock.ErrNotVoting):
			refused = nr.Err
		}
	}
	if answered == 0 {
		m.log.Warn("publish reached no backend", "command", name, "error", refused)
		return 0, ErrNoBackend
	}
	return most, nil
}
