package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The old single Redis during a move to the quorum (Options.MigrateFrom):
// a required participant in every lock operation. An acquisition also
// takes its keys there, with the same token, ttl and mode, and is granted
// only when a quorum of backends AND the old instance said yes; it fails
// as held when the old instance holds a key for another value, and as no
// quorum when it did not answer. A failed acquisition is undone on both
// sides. Extends need the old instance's yes too, and so do the renewals
// of holds (RenewHold): the copy there lives as long as the hold.
// Releases and the plain writes (SET, DEL, PEXPIRE) are mirrored there,
// their answer the backends'; GETSET and INCR are mirrored with an answer
// both sides decide. Reads count a key the old instance holds when the
// backends do not: it is a lock a client that has not moved yet holds.
//
// The old instance is run as a Redlock of one node (quorum 1), so each of
// its operations has the backends' deadline, validity measure and undo.
// Its part of an acquisition starts inside the keys' gate, at the same
// moment as the backends' fan-out, and is waited for before the validity
// is measured from a clock reading taken before either started, so the
// validity holds for both.

// ErrMigrateDiffers: a script by vote that may write answered otherwise
// on the old instance than on a quorum of backends (VoteWrites).
var ErrMigrateDiffers = errors.New("migrate_from answered otherwise")

// MigrateError is the old instance's part of a failed lock operation.
// Kind is ErrHeld (an acquisition found a key held there for another
// value), ErrNotHeld (an extend found it no longer holds the token) or
// ErrNoQuorum (it did not answer in time: down or slow); Unwrap returns
// Kind. Err is the old instance's own error, for logs; Error leaves it
// out.
type MigrateError struct {
	Addr string
	Kind error
	Err  error
}

func (e *MigrateError) Error() string {
	switch {
	case errors.Is(e.Kind, ErrHeld):
		return "lock held on migrate_from " + e.Addr
	case errors.Is(e.Kind, ErrNotHeld):
		return "lock not held on migrate_from " + e.Addr
	case errors.Is(e.Kind, ErrMigrateDiffers):
		return "migrate_from " + e.Addr + " answered the script otherwise than the backends"
	}
	return "migrate_from " + e.Addr + " unreachable"
}

func (e *MigrateError) Unwrap() error { return e.Kind }

// migration is the old instance and what was seen there.
type migration struct {
	old *Redlock // one node, quorum 1
	// heldAcquires counts acquisitions the old instance refused: a key
	// held there for another value.
	heldAcquires atomic.Uint64
	// legacyHolds counts keys seen held on the old instance and not on a
	// quorum of backends: an acquisition the backends granted and the old
	// instance refused, or a read that found the key only there.
	legacyHolds atomic.Uint64
}

// MigrateStats is what the old instance showed since the start.
type MigrateStats struct {
	Addr         string // "" when no migrate_from is set
	HeldAcquires uint64
	LegacyHolds  uint64
}

func newMigration(n Node, opts Options, log hclog.Logger) *migration {
	o := opts
	o.MigrateFrom, o.ReleaseNotices, o.MaxTTL = nil, false, 0
	o.leaveScripts = true            // the old instance's scripts and settings are its clients'
	o.Logger = hclog.NewNullLogger() // one node is meant here: no weak-count warning
	old := New([]Node{n}, o)
	old.log = log.With("migrate-from", n.Addr())
	return &migration{old: old}
}

// MigrateStats reports the old instance's counters.
func (r *Redlock) MigrateStats() MigrateStats {
	m := r.migrate
	if m == nil {
		return MigrateStats{}
	}
	return MigrateStats{Addr: m.old.nodes[0].Addr(), HeldAcquires: m.heldAcquires.Load(), LegacyHolds: m.legacyHolds.Load()}
}

// fail turns the old instance's failure into the operation's error: its
// refusal (no) or its absence (ErrNoQuorum), or the caller's cancellation.
func (m *migration) fail(err error, no error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		var qe *QuorumError
		if !errors.As(err, &qe) { // the caller gave up, not the node
			return err
		}
	}
	kind := ErrNoQuorum
	if errors.Is(err, ErrHeld) || errors.Is(err, ErrNotHeld) {
		kind = no
	}
	return &MigrateError{Addr: m.old.nodes[0].Addr(), Kind: kind, Err: err}
}

// mirror is the old instance's part of one acquisition.
type mirror struct {
	r      *Redlock
	keys   []string
	token  string
	done   chan error // the old instance's acquisition, once
	waited bool
	err    error
}

// mirrorAcquire starts the acquisition of keys on the old instance beside
// the backends' fan-out; nil without migrate_from.
func (r *Redlock) mirrorAcquire(ctx context.Context, keys []string, token string, ttl time.Duration, mode AcquireMode) *mirror {
	m := r.migrate
	if m == nil {
		return nil
	}
	mr := &mirror{r: r, keys: keys, token: token, done: make(chan error, 1)}
	r.bg.Go(func() {
		_, err := m.old.AcquireKeys(ctx, keys, token, ttl, mode)
		if errors.Is(err, ErrHeld) {
			m.heldAcquires.Add(1)
		}
		mr.done <- err
	})
	return mr
}

// wait returns the old instance's answer once the backends granted the
// keys: nil when it set them too. Its acquisition ends by its own node
// deadline, or with the caller's context.
func (mr *mirror) wait() error {
	if mr == nil {
		return nil
	}
	mr.err, mr.waited = <-mr.done, true
	m := mr.r.migrate
	if errors.Is(mr.err, ErrHeld) {
		m.legacyHolds.Add(1) // a quorum of backends had the keys free
		m.old.log.Debug("key held on the old instance", "keys", mr.keys)
	}
	return m.fail(mr.err, ErrHeld)
}

// settle undoes the old instance's part of an acquisition that failed,
// once it has answered; a refusal or failure there was undone by the old
// instance's own acquisition.
func (mr *mirror) settle(failed bool) {
	if mr == nil || !failed {
		return
	}
	if mr.waited {
		if mr.err == nil {
			mr.r.bg.Go(mr.undo)
		}
		return
	}
	mr.r.bg.Go(func() {
		if <-mr.done == nil {
			mr.undo()
		}
	})
}

func (mr *mirror) undo() {
	old := mr.r.migrate.old
	ctx, cancel := context.WithTimeout(context.Background(), old.rollbackTimeout)
	defer cancel()
	if _, err := old.ReleaseKeys(ctx, mr.keys, mr.token); err != nil {
		old.log.Warn("rollback on the old instance failed", "keys", mr.keys, "error", err)
	}
}

// onOld runs op on the old instance beside the backends' operation and
// returns a function that waits for its error; only with migrate_from.
// The caller's cancellation does not stop it: like the
// backends' calls it runs to its own node deadline.
func (r *Redlock) onOld(ctx context.Context, op func(ctx context.Context, old *Redlock) error) func() error {
	done := make(chan error, 1)
	r.bg.Go(func() { done <- op(context.WithoutCancel(ctx), r.migrate.old) })
	return func() error { return <-done }
}

// mirrorRelease releases keys on the old instance too; the returned
// function waits for it. The release's answer is the backends': a key
// the old instance no longer holds, or an old instance that is down, does
// not stop a release, and is logged.
func (r *Redlock) mirrorRelease(ctx context.Context, keys []string, token string) func() {
	if r.migrate == nil {
		return func() {}
	}
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		_, err := old.ReleaseKeys(ctx, keys, token)
		return err
	})
	return func() {
		if err := wait(); err != nil {
			r.migrate.old.log.Warn("release on the old instance failed", "keys", keys, "error", err)
		}
	}
}

// mirrorWrite runs a plain write (SET, DEL, PEXPIRE) on the old instance
// too; the returned function waits for it. Its answer is the backends'.
func (r *Redlock) mirrorWrite(ctx context.Context, op string, args ...any) func() {
	if r.migrate == nil {
		return func() {}
	}
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		cctx, cancel := context.WithTimeout(ctx, old.nodeTimeout)
		defer cancel()
		_, err := old.nodes[0].Do(cctx, args...)
		return err
	})
	return func() {
		if err := wait(); err != nil {
			r.migrate.old.log.Warn("write on the old instance failed", "op", op, "error", err)
		}
	}
}

// mirrorExtend extends keys on the old instance too; the returned
// function combines its answer with the backends' (validity, err): both
// must hold the keys, and the validity is the smaller.
func (r *Redlock) mirrorExtend(ctx context.Context, keys []string, token string, ttl time.Duration, mode ExtendMode) func(time.Duration, error) (time.Duration, error) {
	if r.migrate == nil {
		return func(v time.Duration, err error) (time.Duration, error) { return v, err }
	}
	var left time.Duration
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		var err error
		left, err = old.ExtendKeys(ctx, keys, token, ttl, mode)
		return err
	})
	return func(validity time.Duration, err error) (time.Duration, error) {
		oldErr := wait()
		if err != nil {
			return 0, err
		}
		if oldErr != nil {
			return 0, r.migrate.fail(oldErr, ErrNotHeld)
		}
		return min(validity, left), nil
	}
}

// mirrorCompareAndSet is mirrorExtend for SET … IFEQ.
func (r *Redlock) mirrorCompareAndSet(ctx context.Context, key, old, new string, ttl time.Duration) func(Lock, error) (Lock, error) {
	if r.migrate == nil {
		return func(l Lock, err error) (Lock, error) { return l, err }
	}
	var got Lock
	wait := r.onOld(ctx, func(ctx context.Context, o *Redlock) error {
		var err error
		got, err = o.CompareAndSet(ctx, key, old, new, ttl)
		return err
	})
	return func(l Lock, err error) (Lock, error) {
		oldErr := wait()
		if err != nil {
			return Lock{}, err
		}
		if oldErr != nil {
			return Lock{}, r.migrate.fail(oldErr, ErrNotHeld)
		}
		l.Validity = min(l.Validity, got.Validity)
		return l, nil
	}
}

// mirrorRenew renews a hold's copy on the old instance beside the
// backends' renewal (RenewHold); the returned function combines their
// answers. A renewal the old instance did not confirm is not a renewal:
// when its copy there no longer holds the value (deleted there, or
// expired while the old instance did not answer), a client that has not
// moved may hold the key there now, so the hold ends, with a
// MigrateError of kind ErrNotHeld, even where the backends renewed it;
// when the old instance did not answer, the renewal fails (kind
// ErrNoQuorum) and is tried again while the lease lasts, as one that
// reached no quorum. A hold the backends say is another owner's (ErrHeld:
// that owner renews the old copy) or no longer held (ErrNotHeld) has
// ended here whatever the old instance said.
func (r *Redlock) mirrorRenew(ctx context.Context, key, digest string, ttl time.Duration) func(error) error {
	if r.migrate == nil {
		return func(err error) error { return err }
	}
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		return old.renewCopy(ctx, key, digest, ttl)
	})
	return func(err error) error {
		oldErr := wait()
		switch {
		case errors.Is(err, ErrHeld), errors.Is(err, ErrNotHeld):
			return err
		case oldErr != nil:
			return r.migrate.fail(oldErr, ErrNotHeld)
		}
		return err
	}
}

// renewCopy runs record.RenewCopyScript on r's nodes (the old instance's one):
// nil once a quorum renewed, else a *QuorumError of kind ErrNotHeld or
// ErrNoQuorum.
func (r *Redlock) renewCopy(ctx context.Context, key, digest string, ttl time.Duration) error {
	c := call[bool]{
		cmd:    command{kind: callEval, script: record.RenewCopyScript, keys: []string{key}, args: []any{digest, millis(ttl)}},
		decode: intIs1,
	}
	return r.quorumYes(ctx, "renew hold", r.nodeTimeout, c, ErrNotHeld)
}

// mirrorGetSet runs GETSET on the old instance too, beside the backends'
// (GetSet); the returned function combines the values each side replaced
// (agreed: a quorum of backends returned theirs). The value replaced is
// answered where both sides replaced the same one, or one side held
// nothing (the key lived on the other alone: on the old instance, a value
// a client that has not moved wrote, as reads answer it); where they
// replaced different values, or the backends disagreed, the answer is
// the value written, so that the "has the old timestamp expired?" test of
// a client of that algorithm fails safely on whichever side lost the
// race. A key of another type on the old instance is answered as such
// (nothing was written there). An old instance that does not answer fails
// it, with a MigrateError of kind ErrNoQuorum: the answer may decide a
// lock. Nothing is undone on either side.
func (r *Redlock) mirrorGetSet(ctx context.Context, key, value string, ttl time.Duration) func(Value, bool, error) (Value, error) {
	if r.migrate == nil {
		return func(v Value, _ bool, err error) (Value, error) { return v, err }
	}
	var got Value
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		var err error
		got, _, err = old.getSet(ctx, key, value, ttl)
		return err
	})
	return func(v Value, agreed bool, err error) (Value, error) {
		oldErr := wait()
		same := v.Exists == got.Exists && v.Data == got.Data && v.Type == got.Type
		switch {
		case err != nil:
			return Value{}, err
		case oldErr != nil:
			return Value{}, r.migrate.fail(oldErr, ErrNoQuorum)
		case v.Exists && v.Type != "":
			return v, nil // nothing was written on the backends
		case got.Exists && got.Type != "":
			return got, nil // nor on the old instance
		case !agreed:
			return v, nil // already the value written
		case same || !got.Exists:
			return v, nil
		case !v.Exists:
			r.migrate.legacyHolds.Add(1)
			return got, nil
		}
		return written(value, ttl), nil
	}
}

// mirrorIncr counts on the old instance too, beside the backends' INCRBY
// (Incr); the returned function combines the two counts. The old
// instance's count is the answer, so every value handed out, through any
// proxy or by a client that has not moved, is the answer of one INCRBY
// there: none is handed out twice, and each is more than every value
// answered before it. Where the backends counted further (a counter
// written through the proxy before the move), the old instance counts
// once more, raised past the backends' count first (a value skipped
// there, as a failed increment skips one). Its error reply (the key holds
// no integer there) is the answer, as its clients see it; an old instance
// that does not answer fails the increment, with a MigrateError of kind
// ErrNoQuorum. Incr then raises the backends to the answer.
func (r *Redlock) mirrorIncr(ctx context.Context, key string, by int64) func(int64, error) (int64, error) {
	if r.migrate == nil {
		return func(v int64, err error) (int64, error) { return v, err }
	}
	var got int64
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		var err error
		got, err = old.count(ctx, key, by)
		return err
	})
	return func(v int64, err error) (int64, error) {
		oldErr := wait()
		if err == nil && oldErr == nil && got < v {
			got, oldErr = r.migrate.old.countPast(ctx, key, by, v-by)
		}
		var re RedisError
		switch {
		case err != nil:
			return 0, err
		case errors.As(oldErr, &re):
			return 0, re
		case oldErr != nil:
			return 0, r.migrate.fail(oldErr, ErrNoQuorum)
		}
		return got, nil
	}
}

// mirrorRead reads key on the old instance too; the returned function
// combines its answer with the backends' read: a key absent on a quorum
// of backends but present on the old instance is the old instance's value
// (a lock held by a client that has not moved). An old instance that does
// not answer adds nothing.
func (r *Redlock) mirrorRead(ctx context.Context, key string) func(Value, error) (Value, error) {
	if r.migrate == nil {
		return func(v Value, err error) (Value, error) { return v, err }
	}
	var got Value
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		var err error
		got, err = old.readRegister(ctx, key, false)
		return err
	})
	return func(v Value, err error) (Value, error) {
		oldErr := wait()
		if err != nil || v.Exists || oldErr != nil || !got.Exists {
			return v, err
		}
		r.migrate.legacyHolds.Add(1)
		return got, nil
	}
}

// existsOnOld asks the old instance which of keys exist there (one
// script) and returns the others, for the backends to count, and how many
// it holds: EXISTS counts a key that exists on a quorum of backends or on
// the old instance. An old instance that does not answer holds none.
func (r *Redlock) existsOnOld(ctx context.Context, keys []string) ([]string, int) {
	if r.migrate == nil {
		return keys, 0
	}
	cctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
	defer cancel()
	v, err := r.migrate.old.nodes[0].Eval(cctx, existsScript, keys)
	hits, err2 := asInts(v, len(keys))
	if err != nil || err2 != nil {
		r.migrate.old.log.Warn("exists on the old instance failed", "error", errors.Join(err, err2))
		return keys, 0
	}
	rest := make([]string, 0, len(keys))
	for i, k := range keys {
		if hits[i] != 1 {
			rest = append(rest, k)
		}
	}
	return rest, len(keys) - len(rest)
}

// VoteWrites is Vote for a script that may write (a library's lock script
// that is not recognised): with migrate_from it runs on the old instance
// too, at once, and its reply there must combine with the backends' (the
// same rules as Vote's, over the two), else the call fails with a
// MigrateError of kind ErrMigrateDiffers: a script that took a lock on
// the backends and found it held on the old instance, or the other way
// round, is not answered as a success. Nothing is undone on either side
// (as for any script by vote, a partial effect stays until its own ttl).
// An old instance that does not answer fails it with kind ErrNoQuorum.
func (r *Redlock) VoteWrites(ctx context.Context, s *script.Script, keys []string, args []string) (any, error) {
	v, _, err := r.VoteClamped(ctx, s, keys, args)
	return v, err
}

// VoteClamped is VoteWrites that also returns, for a script made with
// script.Script.Clamped, what a quorum of the backends reported of each
// declared key (redlock/script, clamp.go; nil for another script).
func (r *Redlock) VoteClamped(ctx context.Context, s *script.Script, keys []string, args []string) (any, []script.Wanted, error) {
	if r.migrate == nil {
		return r.voteClamp(ctx, s, keys, args, voteWrite)
	}
	var got any
	wait := r.onOld(ctx, func(ctx context.Context, old *Redlock) error {
		var err error
		got, err = old.Vote(ctx, s, keys, args)
		return err
	})
	v, w, err := r.voteClamp(ctx, s, keys, args, voteWrite)
	oldErr := wait()
	switch {
	case err != nil:
		return nil, nil, err
	case oldErr != nil:
		return nil, nil, r.migrate.fail(oldErr, ErrNoQuorum)
	}
	if _, agreed := combine([]any{v, got}, 2, s.Reply()); agreed < 2 {
		return nil, nil, &MigrateError{Addr: r.migrate.old.nodes[0].Addr(), Kind: ErrMigrateDiffers}
	}
	return v, w, nil
}

// anys is strings (keys, a script's arguments) as command arguments.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
