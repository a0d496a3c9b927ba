package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
)

// minCallTimeout is the floor of a node call's deadline.
const minCallTimeout = time.Millisecond

// fixedDrift is added to the drift allowance of every validity computation.
const fixedDrift = 2 * time.Millisecond

// AcquireMode says when a node grants a lock.
type AcquireMode int

const (
	// IfAbsent grants when every key is absent (SET NX).
	IfAbsent AcquireMode = iota
	// IfAbsentOrMine grants when every key is absent or already holds the
	// token; the node then (re)sets them all with the new ttl.
	IfAbsentOrMine
)

// ExtendMode says how a node sets the new ttl.
type ExtendMode int

const (
	// Replace sets the ttl (PEXPIRE ttl).
	Replace ExtendMode = iota
	// Add adds to the remaining ttl; a key without expiry counts as 0 left.
	Add
)

// KeyState is the outcome of a release for one key.
type KeyState int

const (
	// Released: deleted on a quorum.
	Released KeyState = iota
	// Absent: not released, but absent (or deleted by us) on a quorum: it
	// had expired.
	Absent
	// Other: not released; another value holds it on enough nodes that it
	// is not absent on a quorum.
	Other
)

func (s KeyState) String() string {
	switch s {
	case Released:
		return "released"
	case Absent:
		return "absent"
	case Other:
		return "other"
	}
	return fmt.Sprintf("KeyState(%d)", int(s))
}

// grant is one node's answer to an acquire script (scripts.go): whether
// it set the keys, and the register version their companions recorded
// then.
type grant struct {
	ok  bool
	ver string
}

func asGrant(v any) (grant, error) {
	if g, ok := v.(grant); ok { // a plain Node's SetNX (goSender)
		return g, nil
	}
	ok, ver, err := backend.Granted(v)
	return grant{ok: ok, ver: ver}, err
}

func granted(g grant) bool { return g.ok }

// Acquire sets key to token with the given ttl on a quorum of nodes and
// returns the lock with its validity. It is AcquireKeys of one key with
// IfAbsent, done with SET NX PX in acquireOneScript.
func (r *Redlock) Acquire(ctx context.Context, key, token string, ttl time.Duration) (Lock, error) {
	return r.AcquireKeys(ctx, []string{key}, token, ttl, IfAbsent)
}

// AcquireKeys sets every key to token with the given ttl on a quorum of
// nodes and returns the lock with its validity. Each node grants all keys
// or none (one script, atomic per node): only if every key qualifies under
// mode. It returns as soon as a quorum said yes; the other calls finish in
// the background and are ignored.
//
// Failures are a *QuorumError of kind ErrHeld (a quorum is impossible and a
// quorum of nodes answered, some of them "no"), ErrNoQuorum (more than
// N−quorum nodes failed, or a quorum granted but the validity was used up),
// or an error wrapping ctx.Err() when ctx ended first. Telling ErrHeld from
// ErrNoQuorum may take until the node deadline when nodes hang. After any
// failure the keys this call may have set are compare-and-deleted in the
// background, starting as soon as the failure is certain; the caller does
// not wait for that (Close does). With IfAbsentOrMine that also removes
// keys this token held before the call.
//
// Acquisitions of the same key from this process run one at a time, first
// come first served (see keyGate), so they never split the votes. An
// acquisition keeps the key's gate until each of its node calls that runs
// in a goroutine (no live pipelined connection: see goSend) has returned
// or met its deadline, so a release or acquisition of the key that
// follows it from this process never reaches a node before it; a
// pipelined call is ordered by its connection.
func (r *Redlock) AcquireKeys(ctx context.Context, keys []string, token string, ttl time.Duration, mode AcquireMode) (Lock, error) {
	if err := validateKeys(keys, token, ttl); err != nil {
		return Lock{}, err
	}
	if mode != IfAbsent && mode != IfAbsentOrMine {
		return Lock{}, fmt.Errorf("%w: acquire mode %d", ErrInvalid, mode)
	}
	if err := ctx.Err(); err != nil {
		return Lock{}, fmt.Errorf("acquire: %w", err)
	}
	send, _ := unique(keys)
	set := call[grant]{cmd: backend.Command{Kind: backend.CallSetNX, Keys: send, Value: token, TTL: ttl}, decode: asGrant}
	if len(send) > 1 || mode != IfAbsent {
		all := append(slices.Clone(send), make([]string, 2*len(send))...)
		for i, k := range send {
			all[len(send)+i], all[2*len(send)+i] = versionKey(k), markKey(k)
		}
		set.cmd = backend.Command{Kind: backend.CallEval, Script: acquireScript, Keys: all, Args: []any{token, backend.Millis(ttl), flag(mode == IfAbsentOrMine)}}
	}
	l, err := acquireFanout(r, ctx, send, token, ttl, mode, set, granted, r.grantTally(), nil)
	if err != nil {
		return Lock{}, err
	}
	if len(send) != len(keys) {
		l.Keys = slices.Clone(keys) // as the caller named them, duplicates too
	}
	return l, nil
}

// AcquireHold is Acquire of h.Key with h.Digest the digest of token, for
// a hold (a lock the tier keeps: without expiry, or beyond MaxTTL): each
// node that sets the key writes the hold's field to the record of
// service in the same call (SetHold's write, without its round), so
// that the tier renews it as soon as the lock is granted. A node whose
// copy is rolled back leaves its field to the next renewal or
// round, which drops the field of a key that does not hold its value.
func (r *Redlock) AcquireHold(ctx context.Context, service string, h record.Field, token string, ttl time.Duration) (Lock, error) {
	if err := validateKeys([]string{h.Key}, token, ttl); err != nil {
		return Lock{}, err
	}
	if err := ctx.Err(); err != nil {
		return Lock{}, fmt.Errorf("acquire: %w", err)
	}
	keys := []string{h.Key}
	set := call[grant]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: record.AcquireScript, Keys: append(append(keys, record.Keys(service)...), versionKey(h.Key)), Args: []any{token, backend.Millis(ttl), h.Encode()}},
		decode: asGrant,
	}
	return acquireFanout(r, ctx, keys, token, ttl, IfAbsent, set, granted, r.grantTally(), nil)
}

// voteTally is what acquireFanout needs of a decider: yes votes counted
// towards a quorum, and the failure named.
type voteTally[T any] interface {
	decider[T]
	won() bool
	failure(no error) *QuorumError
	granted() int
}

func (t *tally) granted() int { return t.yes }

// acquireFanout is one acquisition: it enters the keys' gate, sends set to
// every node (and takes the keys on its Mirror with mode), decides with
// t, runs after (when not nil: FENCE's write-back) once a quorum granted,
// waits for the Mirror's yes, and measures the validity after that. On any
// failure it decides the fan-out as failed, so every node that may have set
// the keys (all but a definite "no", per granted) is rolled back after its
// own call returned.
func acquireFanout[T any](r *Redlock, ctx context.Context, keys []string, token string, ttl time.Duration, mode AcquireMode,
	set call[T], granted func(T) bool, t voteTally[T], after func() error) (Lock, error) {
	undo := func(n Node, rep reply[T]) {
		if rep.err == nil && !granted(rep.val) {
			return // a definite "no": the node set nothing
		}
		r.rollback(ctx, n, keys, token)
	}
	pass, err := r.gate.enter(ctx, keys)
	if err != nil {
		return Lock{}, fmt.Errorf("acquire: %w", err)
	}
	// The gate is left once this call returned and every node's call that
	// a goroutine runs is done, which may be after the answer. Such a call
	// (one that waits for its node's connection to be dialed, see goSend)
	// is not ordered against the commands sent after it: it could land
	// after the delete of a Release that followed, and leave a copy of
	// the released lock on that node until its ttl. A pipelined call is
	// not waited for: a later command to its node is queued behind it.
	pass.share()
	defer pass.leaveShared()
	t1 := r.now()
	waitOld, settleOld := r.mirror.Acquire(ctx, keys, token, ttl, mode)
	f := launch(r, "acquire", r.callTimeout(ttl), set, decider[T](t), undo)
	f.afterOwnedCalls(pass.leaveShared)
	failed := true
	defer func() { f.decide(failed); settleOld(failed) }()

	if err := f.wait(ctx); err != nil {
		return Lock{}, err
	}
	if !t.won() {
		return Lock{}, t.failure(ErrHeld)
	}
	if s, ok := any(t).(interface{ split() bool }); ok && s.split() {
		if err := r.confirmHeld(ctx, keys, token, ttl); err != nil {
			return Lock{}, err
		}
	}
	if after != nil {
		if err := after(); err != nil {
			return Lock{}, err
		}
	}
	if err := waitOld(); err != nil {
		return Lock{}, err
	}
	validity := r.validity(ttl, t1, r.now())
	if validity <= 0 {
		return Lock{}, t.failure(ErrNoQuorum)
	}
	failed = false
	return Lock{Key: keys[0], Keys: keys, Token: token, Validity: validity, Granted: t.granted()}, nil
}

// confirmHeld asks every node whether all keys still hold token, for an
// acquisition whose grants were split across register versions: it
// succeeds when a quorum confirms, so that a copy a delete removed after
// it was granted is not counted, and fails with a *QuorumError of kind
// ErrHeld (or ErrNoQuorum when too few answered) otherwise.
func (r *Redlock) confirmHeld(ctx context.Context, keys []string, token string, ttl time.Duration) error {
	c := call[bool]{cmd: backend.Command{Kind: backend.CallEval, Script: holdsAllScript, Keys: keys, Args: []any{token}}, decode: intIs1}
	return r.quorumYes(ctx, "acquire", r.callTimeout(ttl), c, ErrHeld)
}

// Release deletes key on every node where it holds token. It returns nil
// as soon as a quorum deleted it; a *QuorumError of kind ErrNotHeld when a
// quorum of nodes answered that key does not hold token; else of kind
// ErrNoQuorum (too many nodes failed to tell: it may have been held). Node calls run to their
// own deadline even if ctx ends (a release is worth finishing); the call
// then returns ctx.Err() wrapped. Calls still in flight after the decision
// finish in the background.
//
// It answers at the quorum but keeps the key's gate (see keyGate) until
// every node's delete has returned, so a following acquisition of the key
// from this process can never reach a node before this delete does.
func (r *Redlock) Release(ctx context.Context, key, token string) error {
	if err := validate(key, token, time.Millisecond); err != nil {
		return err
	}
	del := call[bool]{cmd: r.releaseCall(key, token), decode: asBool}
	if del.cmd.Kind == backend.CallEval { // the notifying script answers 1 or 0
		del.decode = intIs1
	}
	keys := del.cmd.Keys[:1] // not the marker the script deletes with it
	pass, err := r.gate.enter(ctx, keys)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer r.mirror.Release(ctx, keys, token)()
	t := r.tally()
	if err := quorum(r, ctx, "release", r.nodeTimeout, del, decider[bool](t), pass.leave); err != nil {
		return err
	}
	switch {
	case t.won():
		return nil
	case t.answered-t.yes >= t.q:
		return t.failure(ErrNotHeld) // a quorum said the key does not hold token
	}
	// Released on some, no answer from others: it may have been held on a
	// quorum, and a "not held" would tell its client it had lost it.
	e := t.noQuorum()
	e.Granted = t.yes
	return e
}

// ReleaseKeys deletes every key that holds token on every node and
// classifies each key (states[i] is for keys[i]). It decides as soon as
// every key is Released, else when all nodes answered or their deadlines
// passed. It fails with a *QuorumError of kind ErrNoQuorum when fewer than
// a quorum of nodes answered. Like Release, node calls outlive ctx.
func (r *Redlock) ReleaseKeys(ctx context.Context, keys []string, token string) ([]KeyState, error) {
	if err := validateKeys(keys, token, time.Millisecond); err != nil {
		return nil, err
	}
	send, at := unique(keys)
	del := call[[]int64]{
		cmd:    r.releaseKeysCall(send, token),
		decode: func(v any) ([]int64, error) { return asInts(v, len(send)) },
	}
	pass, err := r.gate.enter(ctx, send)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	defer r.mirror.Release(ctx, send, token)()
	t := r.keyTally(len(send), true)
	if err := quorum(r, ctx, "release", r.nodeTimeout, del, decider[[]int64](t), pass.leave); err != nil {
		return nil, err
	}
	if t.short() {
		return nil, t.noQuorum()
	}
	states := make([]KeyState, len(keys))
	for i, j := range at {
		switch {
		case t.hits[j] >= t.q:
			states[i] = Released
		case t.hits[j]+t.absent[j] >= t.q:
			states[i] = Absent
		default:
			states[i] = Other
		}
	}
	return states, nil
}

// Extend sets key's ttl on every node where it holds token and returns the
// new validity, measured from the start of this call. It is ExtendKeys of
// one key with Replace.
func (r *Redlock) Extend(ctx context.Context, key, token string, ttl time.Duration) (time.Duration, error) {
	return r.ExtendKeys(ctx, []string{key}, token, ttl, Replace)
}

// ExtendKeys sets the ttl of every key, per mode, on every node where all
// of them hold token, and returns the new validity: the smallest ttl set
// among the deciding quorum, less the time since the start of this call
// and the drift. It fails with a *QuorumError of kind ErrNotHeld when a
// quorum is impossible and a quorum of nodes answered (or a quorum
// confirmed but the validity was used up), or of kind ErrNoQuorum when
// more than N−quorum nodes failed. Partial extends are not undone: the
// keys there simply live longer.
func (r *Redlock) ExtendKeys(ctx context.Context, keys []string, token string, ttl time.Duration, mode ExtendMode) (time.Duration, error) {
	if err := validateKeys(keys, token, ttl); err != nil {
		return 0, err
	}
	if mode != Replace && mode != Add {
		return 0, fmt.Errorf("%w: extend mode %d", ErrInvalid, mode)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("extend: %w", err)
	}
	send, _ := unique(keys)
	ms := backend.Millis(ttl)
	expire := call[int64]{
		cmd: backend.Command{Kind: backend.CallCAE, Keys: send, Value: token, TTL: ttl},
		decode: func(v any) (int64, error) {
			if ok, err := asBool(v); !ok || err != nil {
				return 0, err
			}
			return ms, nil
		},
	}
	if len(send) > 1 || mode != Replace {
		expire = call[int64]{
			cmd:    backend.Command{Kind: backend.CallEval, Script: extendScript, Keys: withMarkers(send), Args: []any{token, ms, flag(mode == Add)}},
			decode: asInt,
		}
	}
	return r.mirror.Extend(ctx, send, token, ttl, mode)(r.extend(ctx, ttl, expire))
}

// extend is ExtendKeys's quorum on the backends.
func (r *Redlock) extend(ctx context.Context, ttl time.Duration, expire call[int64]) (time.Duration, error) {
	t1 := r.now()
	t := &ttlTally{tally: tally{counts: r.counts()}}
	if err := quorum(r, ctx, "extend", r.callTimeout(ttl), expire, decider[int64](t), nil); err != nil {
		return 0, err
	}
	if !t.won() {
		return 0, t.failure(ErrNotHeld)
	}
	validity := r.validity(time.Duration(t.least)*time.Millisecond, t1, r.now())
	if validity <= 0 {
		return 0, t.failure(ErrNotHeld)
	}
	return validity, nil
}

func validate(key, token string, ttl time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case token == "":
		return fmt.Errorf("%w: empty token", ErrInvalid)
	case ttl < time.Millisecond:
		return fmt.Errorf("%w: ttl below 1ms", ErrInvalid)
	}
	return nil
}

func validateKeys(keys []string, token string, ttl time.Duration) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: no keys", ErrInvalid)
	}
	for _, k := range keys {
		if err := validate(k, token, ttl); err != nil {
			return err
		}
	}
	return nil
}

// unique returns a copy of keys without repeats, in order, and for each
// key its index in that copy. Node calls may outlive the operation, so
// they must not share the caller's slice.
func unique(keys []string) ([]string, []int) {
	at := make([]int, len(keys))
	if len(keys) == 1 {
		return []string{keys[0]}, at
	}
	out := make([]string, 0, len(keys))
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		j, ok := seen[k]
		if !ok {
			j = len(out)
			seen[k] = j
			out = append(out, k)
		}
		at[i] = j
	}
	return out, at
}

// callTimeout is min(NodeTimeout, 5% of ttl), at least minCallTimeout.
func (r *Redlock) callTimeout(ttl time.Duration) time.Duration {
	d := min(r.nodeTimeout, ttl/20)
	return max(d, minCallTimeout)
}

// validity is ttl − (t2 − t1) − (ttl × drift + 2ms).
func (r *Redlock) validity(ttl time.Duration, t1, t2 time.Time) time.Duration {
	drift := time.Duration(float64(ttl)*r.drift) + fixedDrift
	return ttl - t2.Sub(t1) - drift
}

// rollback deletes each of keys on n that still holds token, on a context
// that the caller's cancellation cannot stop.
func (r *Redlock) rollback(parent context.Context, n Node, keys []string, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), r.rollbackTimeout)
	defer cancel()
	var err error
	if len(keys) == 1 {
		_, err = n.CompareAndDelete(ctx, keys[0], token)
	} else {
		_, err = n.Eval(ctx, releaseScript, withMarkers(keys), token)
	}
	if err != nil {
		r.log.Warn("rollback failed", "node", n.Addr(), "keys", keys, "error", err)
	}
}
