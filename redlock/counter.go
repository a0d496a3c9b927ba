package redlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Counters. A client's INCR (simple-redis-mutex takes its fencing token
// from one) cannot be a plain vote: each backend keeps its own copy, and a
// backend that missed an increment stays behind, so the quorum-th largest
// copy can repeat a value already handed out. Incr makes the counter grow
// across the backends instead, as the lock fences do (fence.go):
//
//  1. INCRBY on every voting node, waiting for every node within the node
//     timeout (not only the fastest quorum);
//  2. V = the largest value among the answers, which must come from a
//     quorum of nodes;
//  3. every voting node is raised to V (its copy set to V where smaller,
//     its ttl kept), and a quorum must confirm, before V is answered.
//
// Two increments one after the other, through any proxies, answer
// increasing values: the second one's quorum shares a node with the first
// one's write-back, whose copy is then at least V, so its INCRBY counts
// past V. Increments of one key through one proxy are serialised by the
// key's gate; increments through two proxies at the same moment may
// answer the same value (Redis never does). A majority of backends
// restarting empty loses the counter, as one Redis without persistence
// does. During a move from one Redis (Options.Mirror, package migrate)
// the old instance counts too, and its count is the answer: then no value
// is answered twice, through any proxies or by clients that have not
// moved.

var (
	// Add ARGV[1] to the counter; with ARGV[2], a counter below it is
	// first raised to it, by the same INCRBY (which keeps the key's ttl on
	// any Redis), so that the answer is more than ARGV[2]. The count is
	// answered as the key's string: INCRBY's integer would pass through a
	// Lua number, exact only up to 2^53.
	incrScript = script.New(`
local by = ARGV[1]
if ARGV[2] then
	local n = tonumber(redis.pcall("GET", KEYS[1]) or "0")
	local past = tonumber(ARGV[2])
	if n and n < past then by = string.format("%.0f", tonumber(by) + past - n) end
end
local n = redis.pcall("INCRBY", KEYS[1], by)
if type(n) == "number" then
	return redis.call("GET", KEYS[1])
end
return n`)

	// Raise the counter to ARGV[1] where it is smaller, keeping its ttl;
	// 1 when it is now at least ARGV[1], 0 when it holds no integer.
	raiseCounterScript = script.New(`
local cur = redis.call("GET", KEYS[1])
if cur == false then cur = "0" end
local n = tonumber(cur)
if n == nil then return 0 end
if n < tonumber(ARGV[1]) then
	redis.call("SET", KEYS[1], ARGV[1], "KEEPTTL")
end
return 1`)
)

// Incr adds by (≥ 1) to the counter at key on every node and returns the
// new value, larger than every value an earlier Incr of key returned (see
// above). A script error that a quorum of nodes answered alike (the key
// holds no integer: "ERR value is not an integer or out of range", or
// another type: WRONGTYPE) comes back as that RedisError, the counter
// unchanged where it holds no integer. It fails with a *QuorumError of
// kind ErrNoQuorum when fewer than a quorum answered, of kind ErrDisagree
// when they answered but fewer than a quorum with an integer or with the
// same error, and of kind ErrNoQuorum when the write-back reached fewer
// than a quorum.
//
// With a Mirror it counts too, and its count is the answer.
func (r *Redlock) Incr(ctx context.Context, key string, by int64) (int64, error) {
	if err := checkKeys(ctx, "incr", []string{key}); err != nil {
		return 0, err
	}
	if Reserved(key) {
		return 0, fmt.Errorf("%w: %s is reserved (prefix %s)", ErrInvalid, key, ReservedPrefix)
	}
	if by < 1 {
		return 0, fmt.Errorf("%w: increment %d below 1", ErrInvalid, by)
	}
	pass, err := r.gate.enter(ctx, []string{key})
	if err != nil {
		return 0, fmt.Errorf("incr: %w", err)
	}
	defer pass.leave()
	v, err := r.mirror.Incr(ctx, key, by)(r.Count(ctx, key, by))
	if err != nil {
		return 0, err
	}
	raise := call[bool]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: raiseCounterScript, Keys: []string{key}, Args: []any{strconv.FormatInt(v, 10)}},
		decode: intIs1,
	}
	if err := r.quorumYes(ctx, "incr", r.nodeTimeout, raise, ErrNoQuorum); err != nil {
		return 0, err
	}
	return v, nil
}

// Count is Incr's first step alone (no gate, no write-back): INCRBY by
// on every node, answering the largest count (largestCount).
func (r *Redlock) Count(ctx context.Context, key string, by int64) (int64, error) {
	return r.countArgs(ctx, key, strconv.FormatInt(by, 10))
}

// CountPast is Count where a counter below past is first raised to it:
// the count is more than past.
func (r *Redlock) CountPast(ctx context.Context, key string, by, past int64) (int64, error) {
	return r.countArgs(ctx, key, strconv.FormatInt(by, 10), strconv.FormatInt(past, 10))
}

func (r *Redlock) countArgs(ctx context.Context, key string, args ...any) (int64, error) {
	run := call[any]{
		cmd: backend.Command{Kind: backend.CallEval, Script: incrScript, Keys: []string{key}, Args: args},
		decode: func(v any) (any, error) {
			if s, ok := v.(string); ok {
				return strconv.ParseInt(s, 10, 64)
			}
			return v, nil
		},
	}
	t := &replyTally{counts: r.counts()}
	if err := quorum(r, ctx, "incr", r.nodeTimeout, run, decider[any](t), nil); err != nil {
		return 0, err
	}
	return largestCount(t)
}

// largestCount is the largest integer among the replies when a quorum of
// them are integers; else an error reply a quorum gave alike, returned as
// the error; else no quorum.
func largestCount(t *replyTally) (int64, error) {
	var ints []int64
	var errs []any
	for _, v := range t.replies {
		switch x := v.(type) {
		case int64:
			ints = append(ints, x)
		case RedisError:
			errs = append(errs, x)
		}
	}
	if len(ints) >= t.q {
		return slices.Max(ints), nil
	}
	if e, ok := quorumEqual(errs, t.q); ok {
		return 0, e.(RedisError)
	}
	agreed := len(ints)
	for _, e := range errs {
		agreed = max(agreed, countEqual(errs, e))
	}
	return 0, t.disagreed(agreed)
}

// countEqual counts the elements of vs equal to v.
func countEqual(vs []any, v any) int {
	n := 0
	for _, w := range vs {
		if w == v {
			n++
		}
	}
	return n
}
