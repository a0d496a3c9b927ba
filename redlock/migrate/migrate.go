package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// ErrDiffers: a script by vote that may write answered otherwise on the
// old instance than on a quorum of backends (redlock.Redlock.VoteWrites).
var ErrDiffers = errors.New("migrate_from answered otherwise")

// Error is the old instance's part of a failed lock operation. Kind is
// redlock.ErrHeld (an acquisition found a key held there for another
// value), redlock.ErrNotHeld (an extend found it no longer holds the
// token), ErrDiffers (Vote) or redlock.ErrNoQuorum (it did not answer in
// time: down or slow); Unwrap returns Kind. Err is the old instance's own
// error, for logs; Error leaves it out.
type Error struct {
	Addr string
	Kind error
	Err  error
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Kind, redlock.ErrHeld):
		return "lock held on migrate_from " + e.Addr
	case errors.Is(e.Kind, redlock.ErrNotHeld):
		return "lock not held on migrate_from " + e.Addr
	case errors.Is(e.Kind, ErrDiffers):
		return "migrate_from " + e.Addr + " answered the script otherwise than the backends"
	}
	return "migrate_from " + e.Addr + " unreachable"
}

func (e *Error) Unwrap() error { return e.Kind }

// Old is the old instance and what was seen there: the redlock.Mirror of
// the backends' Redlock.
type Old struct {
	old  *redlock.Redlock // one node, quorum 1
	node redlock.Node
	log  hclog.Logger
	bg   redlock.Tracker // its part of the backends' operations

	heldAcquires, legacyHolds atomic.Uint64 // redlock.MigrateStats
}

// New returns the old instance n, run with the backends' opts (without
// their Mirror, release notices and max ttl), for their Options.Mirror.
func New(n redlock.Node, opts redlock.Options) *Old {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	o := &Old{node: n, log: log.With("migrate-from", n.Addr())}
	opts.Mirror, opts.ReleaseNotices, opts.MaxTTL = nil, false, 0
	opts.Borrowed = true // its scripts and settings are its clients'
	opts.Logger = o.log
	o.old = redlock.New([]redlock.Node{n}, opts)
	return o
}

// Stats reports the old instance's counters.
func (o *Old) Stats() redlock.MigrateStats {
	return redlock.MigrateStats{Addr: o.node.Addr(), HeldAcquires: o.heldAcquires.Load(), LegacyHolds: o.legacyHolds.Load()}
}

// Close waits for its part of earlier operations, then for the old
// instance's background work.
func (o *Old) Close(ctx context.Context) error {
	if err := o.bg.Wait(ctx); err != nil {
		return err
	}
	return o.old.Close(ctx)
}

// CloseNodes closes the connection to the old instance.
func (o *Old) CloseNodes() error { return o.old.CloseNodes() }

// fail turns the old instance's failure into the operation's error: its
// refusal (no) or its absence (ErrNoQuorum), or the caller's cancellation.
func (o *Old) fail(err error, no error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) { // the caller gave up, not the node
			return err
		}
	}
	kind := redlock.ErrNoQuorum
	if errors.Is(err, redlock.ErrHeld) || errors.Is(err, redlock.ErrNotHeld) {
		kind = no
	}
	return &Error{Addr: o.node.Addr(), Kind: kind, Err: err}
}

// either is the backends' error, else the old instance's failure (fail).
func (o *Old) either(err, oldErr, no error) error {
	if err != nil {
		return err
	}
	return o.fail(oldErr, no)
}

// start runs op on the old instance beside the backends' operation and
// returns what waits for its answer. The caller's cancellation does not
// stop it: like the backends' calls it runs to its own node deadline.
func start[T any](ctx context.Context, o *Old, op func(ctx context.Context, old *redlock.Redlock) (T, error)) func() (T, error) {
	var got T
	done := make(chan error, 1)
	o.bg.Go(func() {
		var err error
		got, err = op(context.WithoutCancel(ctx), o.old)
		done <- err
	})
	return func() (T, error) { err := <-done; return got, err }
}

// Acquire starts the acquisition of keys on the old instance beside the
// backends' fan-out; it ends by its own node deadline, or with the
// caller's context. wait returns its answer once the backends granted the
// keys: nil when it set them too. settle undoes it when the acquisition
// failed, once it has answered (a refusal or failure there was undone by
// the old instance's own acquisition).
func (o *Old) Acquire(ctx context.Context, keys []string, token string, ttl time.Duration, mode redlock.AcquireMode) (wait func() error, settle func(failed bool)) {
	done := make(chan error, 1)
	o.bg.Go(func() {
		_, err := o.old.AcquireKeys(ctx, keys, token, ttl, mode)
		if errors.Is(err, redlock.ErrHeld) {
			o.heldAcquires.Add(1)
		}
		done <- err
	})
	wait = func() error {
		err := <-done
		done <- err // for settle
		if errors.Is(err, redlock.ErrHeld) {
			o.legacyHolds.Add(1) // a quorum of backends had the keys free
			o.log.Debug("key held on the old instance", "keys", keys)
		}
		return o.fail(err, redlock.ErrHeld)
	}
	settle = func(failed bool) {
		if !failed {
			return
		}
		o.bg.Go(func() {
			if <-done != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), o.old.RollbackTimeout())
			defer cancel()
			if _, err := o.old.ReleaseKeys(ctx, keys, token); err != nil {
				o.log.Warn("rollback on the old instance failed", "keys", keys, "error", err)
			}
		})
	}
	return wait, settle
}

// Release releases keys on the old instance too; the returned function
// waits for it. The release's answer is the backends': a key the old
// instance no longer holds, or an old instance that is down, does not
// stop a release, and is logged.
func (o *Old) Release(ctx context.Context, keys []string, token string) func() {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) ([]redlock.KeyState, error) {
		return old.ReleaseKeys(ctx, keys, token)
	})
	return func() {
		if _, err := wait(); err != nil {
			o.log.Warn("release on the old instance failed", "keys", keys, "error", err)
		}
	}
}

// Write runs a plain write (SET, DEL, PEXPIRE, PERSIST) on the old
// instance too; the returned function waits for it. Its answer is the
// backends'.
func (o *Old) Write(ctx context.Context, op string, args ...any) func() {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, old.NodeTimeout())
		defer cancel()
		return o.node.Do(ctx, args...)
	})
	return func() {
		if _, err := wait(); err != nil {
			o.log.Warn("write on the old instance failed", "op", op, "error", err)
		}
	}
}

// Extend extends keys on the old instance too; the returned function
// combines its answer with the backends' (validity, err): both must hold
// the keys, and the validity is the smaller.
func (o *Old) Extend(ctx context.Context, keys []string, token string, ttl time.Duration, mode redlock.ExtendMode) func(time.Duration, error) (time.Duration, error) {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) (time.Duration, error) {
		return old.ExtendKeys(ctx, keys, token, ttl, mode)
	})
	return func(validity time.Duration, err error) (time.Duration, error) {
		left, oldErr := wait()
		if err = o.either(err, oldErr, redlock.ErrNotHeld); err != nil {
			return 0, err
		}
		return min(validity, left), nil
	}
}

// CompareAndSet is Extend for SET … IFEQ.
func (o *Old) CompareAndSet(ctx context.Context, key, old, new string, ttl time.Duration) func(redlock.Lock, error) (redlock.Lock, error) {
	wait := start(ctx, o, func(ctx context.Context, r *redlock.Redlock) (redlock.Lock, error) {
		return r.CompareAndSet(ctx, key, old, new, ttl)
	})
	return func(l redlock.Lock, err error) (redlock.Lock, error) {
		got, oldErr := wait()
		if err = o.either(err, oldErr, redlock.ErrNotHeld); err != nil {
			return redlock.Lock{}, err
		}
		l.Validity = min(l.Validity, got.Validity)
		return l, nil
	}
}

// RenewHold renews a hold's copy on the old instance beside the backends'
// renewal (redlock.Redlock.RenewHold); the returned function combines
// their answers. A renewal the old instance did not confirm is not a
// renewal: when its copy there no longer holds the value (deleted there,
// or expired while the old instance did not answer), a client that has
// not moved may hold the key there now, so the hold ends, with an *Error
// of kind ErrNotHeld, even where the backends renewed it; when the old
// instance did not answer, the renewal fails (kind ErrNoQuorum) and is
// tried again while the lease lasts, as one that reached no quorum. A
// hold the backends say is another owner's (ErrHeld: that owner renews
// the old copy) or no longer held (ErrNotHeld) has ended here whatever
// the old instance said.
func (o *Old) RenewHold(ctx context.Context, key, digest string, ttl time.Duration) func(error) error {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) (struct{}, error) {
		return struct{}{}, old.RenewCopy(ctx, key, digest, ttl)
	})
	return func(err error) error {
		_, oldErr := wait()
		switch {
		case errors.Is(err, redlock.ErrHeld), errors.Is(err, redlock.ErrNotHeld):
			return err
		case oldErr != nil:
			return o.fail(oldErr, redlock.ErrNotHeld)
		}
		return err
	}
}

// GetSet runs GETSET on the old instance too, beside the backends'
// (redlock.Redlock.GetSet); the returned function combines the values
// each side replaced (agreed: a quorum of backends returned theirs). The
// value replaced is answered where both sides replaced the same one, or
// one side held nothing (the key lived on the other alone: on the old
// instance, a value a client that has not moved wrote, as reads answer
// it); where they replaced different values, or the backends disagreed,
// the answer is the value written, so that the "has the old timestamp
// expired?" test of a client of that algorithm fails safely on whichever
// side lost the race. A key of another type on the old instance is
// answered as such (nothing was written there). An old instance that does
// not answer fails it, with an *Error of kind ErrNoQuorum: the answer may
// decide a lock. Nothing is undone on either side.
func (o *Old) GetSet(ctx context.Context, key, value string, ttl time.Duration) func(redlock.Value, bool, error) (redlock.Value, error) {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) (redlock.Value, error) {
		return old.GetSet(ctx, key, value, ttl)
	})
	return func(v redlock.Value, agreed bool, err error) (redlock.Value, error) {
		got, oldErr := wait()
		if err = o.either(err, oldErr, redlock.ErrNoQuorum); err != nil {
			return redlock.Value{}, err
		}
		switch {
		case v.Exists && v.Type != "":
			return v, nil // nothing was written on the backends
		case got.Exists && got.Type != "":
			return got, nil // nor on the old instance
		case !agreed:
			return v, nil // already the value written
		case v.Exists == got.Exists && v.Data == got.Data && v.Type == got.Type, !got.Exists:
			return v, nil
		case !v.Exists:
			o.legacyHolds.Add(1)
			return got, nil
		}
		return redlock.Written(value, ttl), nil
	}
}

// Incr counts on the old instance too, beside the backends' INCRBY
// (redlock.Redlock.Incr); the returned function combines the two counts.
// The old instance's count is the answer, so every value handed out,
// through any proxy or by a client that has not moved, is the answer of
// one INCRBY there: none is handed out twice, and each is more than every
// value answered before it. Where the backends counted further (a counter
// written through the proxy before the move), the old instance counts
// once more, raised past the backends' count first (a value skipped
// there, as a failed increment skips one). Its error reply (the key holds
// no integer there) is the answer, as its clients see it; an old instance
// that does not answer fails the increment, with an *Error of kind
// ErrNoQuorum. Incr then raises the backends to the answer.
func (o *Old) Incr(ctx context.Context, key string, by int64) func(int64, error) (int64, error) {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) (int64, error) {
		return old.Count(ctx, key, by)
	})
	return func(v int64, err error) (int64, error) {
		got, oldErr := wait()
		if err == nil && oldErr == nil && got < v {
			got, oldErr = o.old.CountPast(ctx, key, by, v-by)
		}
		var re redlock.RedisError
		switch {
		case err != nil:
			return 0, err
		case errors.As(oldErr, &re):
			return 0, re
		case oldErr != nil:
			return 0, o.fail(oldErr, redlock.ErrNoQuorum)
		}
		return got, nil
	}
}

// Read reads key on the old instance too; the returned function combines
// its answer with the backends' read: a key absent on a quorum of
// backends but present on the old instance is the old instance's value (a
// lock held by a client that has not moved). An old instance that does
// not answer adds nothing.
func (o *Old) Read(ctx context.Context, key string) func(redlock.Value, error) (redlock.Value, error) {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) (redlock.Value, error) {
		return old.Read(ctx, key)
	})
	return func(v redlock.Value, err error) (redlock.Value, error) {
		got, oldErr := wait()
		if err != nil || v.Exists || oldErr != nil || !got.Exists {
			return v, err
		}
		o.legacyHolds.Add(1)
		return got, nil
	}
}

// Exists asks the old instance which of keys exist there (one script)
// and returns the others, for the backends to count, and how many it
// holds: EXISTS counts a key that exists on a quorum of backends or on
// the old instance. An old instance that does not answer holds none.
func (o *Old) Exists(ctx context.Context, keys []string) ([]string, int) {
	ctx, cancel := context.WithTimeout(ctx, o.old.NodeTimeout())
	defer cancel()
	v, err := o.node.Eval(ctx, redlock.ExistsScript, keys)
	hits, _ := v.([]any)
	if err == nil && len(hits) != len(keys) {
		err = fmt.Errorf("unexpected reply %T, want %d integers", v, len(keys))
	}
	if err != nil {
		o.log.Warn("exists on the old instance failed", "error", err)
		return keys, 0
	}
	rest := make([]string, 0, len(keys))
	for i, k := range keys {
		if hits[i] != int64(1) {
			rest = append(rest, k)
		}
	}
	return rest, len(keys) - len(rest)
}

// Vote runs a script that may write (redlock.Redlock.VoteWrites) on the
// old instance too, at once; the returned function checks that its reply
// there combines with the backends' (the same rules as a vote's, over the
// two), else the call fails with an *Error of kind ErrDiffers: a script
// that took a lock on the backends and found it held on the old instance,
// or the other way round, is not answered as a success. Nothing is undone
// on either side (as for any script by vote, a partial effect stays until
// its own ttl). An old instance that does not answer fails it with kind
// ErrNoQuorum.
func (o *Old) Vote(ctx context.Context, s *script.Script, keys, args []string) func(any, error) error {
	wait := start(ctx, o, func(ctx context.Context, old *redlock.Redlock) (any, error) {
		return old.Vote(ctx, s, keys, args)
	})
	return func(v any, err error) error {
		got, oldErr := wait()
		if err = o.either(err, oldErr, redlock.ErrNoQuorum); err != nil {
			return err
		}
		if _, agreed := redlock.Combine([]any{v, got}, 2, s.Reply()); agreed < 2 {
			return &Error{Addr: o.node.Addr(), Kind: ErrDiffers}
		}
		return nil
	}
}
