package redlock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// FenceKey is the fence counter each backend keeps: one per backend, shared
// by every lock key, so it only ever grows.
const FenceKey = "redlock-proxy:fence"

// Fencing. The acquire script INCRs the backend's counter whether or not
// it grants the lock and returns it. The proxy waits for every voting node
// to answer (or meet its deadline), not just the first quorum, takes the
// largest counter T among the nodes that answered, raises it above every
// fence this process issued or learned (the high-water mark, FenceHighWater),
// and writes T back before it answers: every node that answers raises its
// counter to T, and a quorum of them must confirm that our key still holds
// our token there. A later holder's quorum shares at least one node with
// that confirming quorum; it can only lock there after our key expired,
// when the counter is already ≥ T, so its INCR yields more than T. Raising
// every answering node, and reading every node rather than the fastest
// quorum, keeps T on the backends that survive when a majority restarts
// empty, so that the next holder, through any proxy, still reads it.
// docs/safety.md has the argument and its limits.

var (
	// {grant, fence}: grant as acquireOneScript answers it, of KEYS[1]
	// with its companion KEYS[3] and its lock marker KEYS[4].
	fenceAcquireScript = script.New(`
local fence = redis.call("INCR", KEYS[2])
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	redis.call("SET", KEYS[4], redis.sha1hex(ARGV[1]), "PX", ARGV[2])
	local c = redis.call("GET", KEYS[3])
	return {c and string.match(c, "^%d+ %S+") or 1, fence}
end
return {0, fence}`)

	// Raise the counter to ARGV[2]; 1 iff KEYS[1] still holds our token.
	// Raising it where the key is not ours is harmless (counters only grow)
	// and keeps the fence on every backend that answered.
	fenceWriteBackScript = script.New(`
local current = tonumber(redis.call("GET", KEYS[2]) or "0") or 0
if current < tonumber(ARGV[2]) then
	redis.call("SET", KEYS[2], ARGV[2])
end
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
	return 0
end
return 1`)
)

// fenceReply is one node's answer to the fenced acquire.
type fenceReply struct {
	grant
	fence int64
}

// fenceTally is a grantTally that also keeps the largest counter seen.
type fenceTally struct {
	*grantTally
	max int64
}

func (t *fenceTally) add(v fenceReply) {
	t.grantTally.add(v.grant)
	t.max = max(t.max, v.fence)
}

// done waits for every node that votes (each call ends at its deadline),
// so that the counters of all of them count, not only the fastest quorum's;
// a lost acquisition is still decided as soon as its failure can be named.
func (t *fenceTally) done() bool { return t.pending() == 0 || t.lost() && t.settled() }

// AcquireFenced is Acquire with a fencing token: Lock.Fence strictly
// increases across successive holders of key (see FenceKey). Unlike
// Acquire it waits for every voting node's answer, or its deadline, before
// it decides a grant. The validity is measured after the fence was written
// back to a quorum. It fails with ErrNoQuorum when the write-back does not
// reach a quorum, and rolls back.
func (r *Redlock) AcquireFenced(ctx context.Context, key, token string, ttl time.Duration) (Lock, error) {
	if err := validate(key, token, ttl); err != nil {
		return Lock{}, err
	}
	if Reserved(key) {
		return Lock{}, fmt.Errorf("%w: %s is reserved (prefix %s)", ErrInvalid, key, ReservedPrefix)
	}
	if err := ctx.Err(); err != nil {
		return Lock{}, fmt.Errorf("acquire: %w", err)
	}
	keys := []string{key, FenceKey, versionKey(key), markKey(key)}
	set := call[fenceReply]{
		cmd: backend.Command{Kind: backend.CallEval, Script: fenceAcquireScript, Keys: keys, Args: []any{token, backend.Millis(ttl)}},
		decode: func(v any) (fenceReply, error) {
			a, _ := v.([]any)
			if len(a) != 2 {
				return fenceReply{}, fmt.Errorf("unexpected reply %v, want a fenced acquire's", v)
			}
			fence, err := asInt(a[1])
			if err != nil {
				return fenceReply{}, err
			}
			g, err := asGrant(a[0])
			return fenceReply{grant: g, fence: fence}, err
		},
	}
	granted := func(v fenceReply) bool { return v.ok }
	t := &fenceTally{grantTally: r.grantTally()}
	var fence int64
	writeBack := func() error {
		fence = r.raiseFence(t.max)
		return r.writeBackFence(ctx, key, token, fence, ttl)
	}
	l, err := acquireFanout(r, ctx, keys[:1], token, ttl, IfAbsent, set, granted, voteTally[fenceReply](t), writeBack)
	if err != nil {
		return Lock{}, err
	}
	l.Fence = fence
	return l, nil
}

// raiseFence returns max(t, the high-water mark + 1) and records it as the
// new mark.
func (r *Redlock) raiseFence(t int64) int64 {
	for {
		hwm := r.fenceHWM.Load()
		next := max(t, hwm+1)
		if r.fenceHWM.CompareAndSwap(hwm, next) {
			return next
		}
	}
}

// writeBackFence raises the counter to fence on every node that answers,
// and succeeds when key still holds token on a quorum of them.
func (r *Redlock) writeBackFence(ctx context.Context, key, token string, fence int64, ttl time.Duration) error {
	write := call[bool]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: fenceWriteBackScript, Keys: []string{key, FenceKey}, Args: []any{token, fence}},
		decode: intIs1,
	}
	return r.quorumYes(ctx, "fence", r.callTimeout(ttl), write, ErrNoQuorum)
}

// ReservedPrefix starts every key the proxy keeps on the backends for
// itself: the fence counter (FenceKey) and the membership of the proxy
// tier (package tier). Clients may not name such keys: a client that
// could write them could lower a fence counter or forge a proxy.
const ReservedPrefix = "redlock-proxy:"

// Reserved reports whether key belongs to the proxy (see ReservedPrefix).
func Reserved(key string) bool { return strings.HasPrefix(key, ReservedPrefix) }

// Sharing the fence high-water mark between proxies. Each process keeps
// the highest fence it issued; package tier's heartbeat raises every
// backend's counter to it and raises it to the largest counter it reads,
// so that the marks of the live proxies and the counters of every backend
// converge on the highest fence any of them issued. A proxy that restarts
// reads that before it serves (tier.Join), and a majority of backends
// restarting empty gets its counters back from the proxies' marks within
// one heartbeat. docs/safety.md has the argument.

// FenceHighWater is the highest fence this process issued or learned
// through RaiseFenceHighWater: every later fence is larger.
func (r *Redlock) FenceHighWater() int64 { return r.fenceHWM.Load() }

// RaiseFenceHighWater raises the high-water mark to at least v, so that
// every fence this process issues from now on is above v. It reports
// whether the mark moved.
func (r *Redlock) RaiseFenceHighWater(v int64) bool {
	for {
		hwm := r.fenceHWM.Load()
		if v <= hwm {
			return false
		}
		if r.fenceHWM.CompareAndSwap(hwm, v) {
			return true
		}
	}
}
