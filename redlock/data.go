package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The plain data operations that legacy clients send (GET, SET, DEL, …),
// each done on every node and answered with what a quorum agrees on.

// PTTL values of a Value without a remaining ttl.
const (
	PTTLNoExpiry time.Duration = -1 // the key exists without expiry
	PTTLAbsent   time.Duration = -2 // the key does not exist
)

// Value is what a quorum of nodes agrees a key holds.
type Value struct {
	Exists bool
	Data   string // when Exists and the key is a string
	// Type is "" for a string key, else the Redis type the key holds
	// ("hash", "list", …: a library's hash lock); Data is then empty and
	// nodes agree on the type, not on the contents.
	Type string
	// PTTL is how long a quorum of nodes will still hold Data: the
	// quorum-th largest remaining ttl among the nodes that hold it (Read;
	// for Get only a lower bound, over the nodes counted before it
	// decided); PTTLNoExpiry or PTTLAbsent otherwise.
	PTTL time.Duration
}

// Read gets the value and ttl of key on every node (one script per node,
// register.go) and returns the value a quorum agrees on; a quorum of
// "absent" is a value too. Its PTTL is the quorum-th largest remaining ttl
// among the nodes holding that value, over every node that answered
// within its deadline: exactly when the key stops being held by a quorum,
// so it reflects every write (an extend, an expire) that reached a quorum,
// and one node that missed it never shows the older ttl. Read therefore
// waits for every node, each within its deadline. When no value has a
// quorum, Read answers the newest plain write any node reports, after
// writing it back to a quorum (its PTTL then the least any node holding
// it has left); when a lock command changed the newest, there is no
// answer: ErrNoQuorum. It fails with a *QuorumError of kind ErrNoQuorum
// when fewer than a quorum of nodes answered.
func (r *Redlock) Read(ctx context.Context, key string) (Value, error) {
	return r.mirror.Read(ctx, key)(r.readRegister(ctx, key, false))
}

// Get is Read for the value alone: it decides as soon as one value has a
// quorum, so a slow node does not slow it, and its PTTL is only a bound
// (the quorum-th largest among the nodes counted so far). Any value a
// quorum agrees on is the latest written to a quorum: two quorums share a
// node, and no node goes back to an older version (register.go).
func (r *Redlock) Get(ctx context.Context, key string) (Value, error) {
	return r.mirror.Read(ctx, key)(r.readRegister(ctx, key, true))
}

// Exists counts the keys that exist on a quorum of nodes (a repeated key
// counts each time, as with EXISTS). It waits for every node, each within
// its deadline, and fails with ErrNoQuorum when fewer than a quorum
// answered.
func (r *Redlock) Exists(ctx context.Context, keys []string) (int, error) {
	if err := checkKeys(ctx, "exists", keys); err != nil {
		return 0, err
	}
	keys, onOld := r.mirror.Exists(ctx, keys)
	if len(keys) == 0 {
		return onOld, nil
	}
	n, err := r.countKeys(ctx, "exists", ExistsScript, keys)
	return n + onOld, err
}

// Delete deletes keys unconditionally on every node, one versioned write
// per key in turn (register.go), and counts the keys that existed: the
// newest version held it or a quorum did (a repeated key counts once, as
// with DEL). It waits for every node, each within its deadline, and fails
// with ErrNoQuorum when fewer than a quorum answered; keys before the
// failing one are deleted.
func (r *Redlock) Delete(ctx context.Context, keys []string) (int, error) {
	if err := checkKeys(ctx, "delete", keys); err != nil {
		return 0, err
	}
	defer r.mirror.Write(ctx, "delete", append([]any{"DEL"}, anys(keys)...)...)()
	n := 0
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			continue
		}
		existed, err := r.writeRegister(ctx, "delete", k, false, "", 0)
		if err != nil {
			return 0, err
		}
		if existed {
			n++
		}
	}
	return n, nil
}

// countKeys runs a per-key script on every node and counts the keys with
// a quorum of 1s.
func (r *Redlock) countKeys(ctx context.Context, op string, s *script.Script, keys []string) (int, error) {
	if err := checkKeys(ctx, op, keys); err != nil {
		return 0, err
	}
	return r.countKeysWith(ctx, op, backend.Command{Kind: backend.CallEval, Script: s, Keys: slices.Clone(keys)})
}

// countKeysWith runs cmd, a per-key script, on every node and counts the
// keys with a quorum of 1s.
func (r *Redlock) countKeysWith(ctx context.Context, op string, cmd backend.Command) (int, error) {
	keys := cmd.Keys
	count := call[[]int64]{
		cmd:    cmd,
		decode: func(v any) ([]int64, error) { return asInts(v, len(keys)) },
	}
	t := r.keyTally(len(keys), false)
	if err := quorum(r, ctx, op, r.nodeTimeout, count, decider[[]int64](t), nil); err != nil {
		return 0, err
	}
	if t.short() {
		return 0, t.noQuorum()
	}
	return t.quorate(), nil
}

// Holding asks every node, each within the node timeout, whether key holds
// value there, and returns how many do and how many nodes there are. It
// waits for every node; a node that fails does not hold it.
func (r *Redlock) Holding(ctx context.Context, key, value string) (holding, nodes int) {
	get := call[bool]{
		cmd:    backend.Command{Kind: backend.CallDo, Args: []any{"GET", key}},
		decode: func(v any) (bool, error) { s, _ := v.(string); return s == value, nil },
	}
	t := &yesCount{counts: r.counts()}
	_ = quorum(r, ctx, "holding", r.nodeTimeout, get, decider[bool](t), nil)
	return t.yes, len(r.nodes)
}

// Write sets key to value unconditionally on every node, with a ttl when
// ttl > 0 and without expiry otherwise: a versioned write (register.go),
// under the key's gate, that reads the versions of a quorum and then
// writes a higher one. It returns nil as soon as a quorum acknowledged,
// else a *QuorumError of kind ErrNoQuorum.
func (r *Redlock) Write(ctx context.Context, key, value string, ttl time.Duration) error {
	if err := checkKeys(ctx, "write", []string{key}); err != nil {
		return err
	}
	args := []any{"SET", key, value}
	if ttl > 0 {
		args = append(args, "PX", backend.Millis(ttl))
	}
	defer r.mirror.Write(ctx, "write", args...)()
	_, err := r.writeRegister(ctx, "write", key, true, value, ttl)
	return err
}

// FlushAll runs FLUSHDB on every node: nil as soon as a quorum
// acknowledged, else a *QuorumError of kind ErrNoQuorum.
func (r *Redlock) FlushAll(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return r.ack(ctx, "flush", r.nodeTimeout, []any{"FLUSHDB"})
}

// ack sends one command to every node and decides at a quorum of replies.
func (r *Redlock) ack(ctx context.Context, op string, d time.Duration, args []any) error {
	do := call[bool]{cmd: backend.Command{Kind: backend.CallDo, Args: args}, decode: func(any) (bool, error) { return true, nil }}
	return r.quorumYes(ctx, op, d, do, ErrNoQuorum)
}

// GetSet sets key to value on every node (with a ttl when ttl > 0), each
// node returning the value it replaced, atomically. It returns that old
// value (absent: Exists false) only when a quorum of nodes returned the
// same one, and otherwise Value{Exists: true, Data: value}, what this call
// wrote, so that a legacy "has the old timestamp expired?" test fails
// safely. A node where key is of another type writes nothing and returns
// it (Value.Type), as GETSET refuses it. It waits for every node, each
// within its deadline, and fails with ErrNoQuorum when fewer than a quorum
// acknowledged.
//
// With a Mirror it runs there too (package migrate): the value replaced
// is answered only where the two sides agree on it.
func (r *Redlock) GetSet(ctx context.Context, key, value string, ttl time.Duration) (Value, error) {
	if err := checkKeys(ctx, "getset", []string{key}); err != nil {
		return Value{}, err
	}
	return r.mirror.GetSet(ctx, key, value, ttl)(r.getSet(ctx, key, value, ttl))
}

// getSet is GetSet on r's nodes. It also reports whether a quorum
// returned the value it answers (else it answers the value written).
func (r *Redlock) getSet(ctx context.Context, key, value string, ttl time.Duration) (Value, bool, error) {
	var ms int64
	if ttl > 0 {
		ms = backend.Millis(ttl)
	}
	swap := call[Value]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: getSetScript, Keys: []string{key}, Args: []any{value, ms}},
		decode: asValue,
	}
	t := r.valueTally(false)
	if err := quorum(r, ctx, "getset", r.dataTimeout(ttl), swap, decider[Value](t), nil); err != nil {
		return Value{}, false, err
	}
	if t.short() {
		return Value{}, false, t.noQuorum()
	}
	if old, ok := t.winner(); ok {
		return old, true, nil
	}
	return Written(value, ttl), false, nil
}

// Written is the Value a write of value with ttl (0: none) leaves.
func Written(value string, ttl time.Duration) Value {
	v := Value{Exists: true, Data: value, PTTL: PTTLNoExpiry}
	if ttl > 0 {
		v.PTTL = time.Duration(backend.Millis(ttl)) * time.Millisecond
	}
	return v
}

// Expire sets key's ttl unconditionally (PEXPIRE) on every node, and its
// lock marker's where the marker holds the key's value (markedExpireScript).
// It returns true as soon as a quorum applied it (the key existed there),
// false with a nil error when that became impossible and enough nodes
// answered, and a *QuorumError of kind ErrNoQuorum when more than
// N−quorum nodes failed. ttl must be at least 1ms.
func (r *Redlock) Expire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, fmt.Errorf("%w: ttl below 1ms", ErrInvalid)
	}
	if err := checkKeys(ctx, "expire", []string{key}); err != nil {
		return false, err
	}
	ms := backend.Millis(ttl)
	defer r.mirror.Write(ctx, "expire", "PEXPIRE", key, ms)()
	expire := call[bool]{cmd: backend.Command{Kind: backend.CallEval, Script: markedExpireScript, Keys: []string{key, markKey(key)}, Args: []any{ms}}, decode: intIs1}
	return r.quorumWon(ctx, "expire", r.callTimeout(ttl), expire)
}

// Persist takes away key's expiry (PERSIST) on every node. It returns
// true as soon as a quorum applied it (the key existed there with an
// expiry), false with a nil error when that became impossible and enough
// nodes answered, and a *QuorumError of kind ErrNoQuorum when more than
// N−quorum nodes failed.
func (r *Redlock) Persist(ctx context.Context, key string) (bool, error) {
	if err := checkKeys(ctx, "persist", []string{key}); err != nil {
		return false, err
	}
	defer r.mirror.Write(ctx, "persist", "PERSIST", key)()
	persist := call[bool]{cmd: backend.Command{Kind: backend.CallDo, Args: []any{"PERSIST", key}}, decode: intIs1}
	return r.quorumWon(ctx, "persist", r.nodeTimeout, persist)
}

// CompareAndSet sets key to new with the given ttl on every node where it
// holds old, and returns the lock new now holds, its validity measured
// from the start of this call as for Acquire. It fails with a *QuorumError
// of kind ErrNotHeld (old held on too few nodes, or the validity used up)
// or ErrNoQuorum (more than N−quorum nodes failed). Nothing is undone.
func (r *Redlock) CompareAndSet(ctx context.Context, key, old, new string, ttl time.Duration) (Lock, error) {
	if err := validate(key, new, ttl); err != nil {
		return Lock{}, err
	}
	if old == "" {
		return Lock{}, fmt.Errorf("%w: empty token", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return Lock{}, fmt.Errorf("compare-and-set: %w", err)
	}
	return r.mirror.CompareAndSet(ctx, key, old, new, ttl)(r.compareAndSet(ctx, key, old, new, ttl))
}

// compareAndSet is CompareAndSet's quorum on the backends.
func (r *Redlock) compareAndSet(ctx context.Context, key, old, new string, ttl time.Duration) (Lock, error) {
	set := call[bool]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: casScript, Keys: []string{key, markKey(key)}, Args: []any{old, new, backend.Millis(ttl)}},
		decode: intIs1,
	}
	t1 := r.now()
	t := r.tally()
	if err := quorum(r, ctx, "compare-and-set", r.callTimeout(ttl), set, decider[bool](t), nil); err != nil {
		return Lock{}, err
	}
	if !t.won() {
		return Lock{}, t.failure(ErrNotHeld)
	}
	validity := r.validity(ttl, t1, r.now())
	if validity <= 0 {
		return Lock{}, t.failure(ErrNotHeld)
	}
	return Lock{Key: key, Keys: []string{key}, Token: new, Validity: validity, Granted: t.yes}, nil
}

// checkKeys rejects an empty key list or key, and a caller that gave up.
func checkKeys(ctx context.Context, op string, keys []string) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: no keys", ErrInvalid)
	}
	if slices.Contains(keys, "") {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// dataTimeout is the node deadline of a write with an optional ttl.
func (r *Redlock) dataTimeout(ttl time.Duration) time.Duration {
	if ttl > 0 {
		return r.callTimeout(ttl)
	}
	return r.nodeTimeout
}

// anys is strings (keys, a script's arguments) as command arguments.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
