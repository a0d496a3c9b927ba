package commands

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands/lua"
	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// A recognised script (lua.Meaning) is carried out as the quorum operation
// it means, through the lease Manager, with the validity, rollback, waiter
// hand-off and keeping of every other acquisition, and answered in the
// library's own reply convention (m.ReplyFor, m.ReleaseReply). The ttl of
// a script must be at least min_ttl; beyond max_ttl, one key taken or set
// to it is held as SET NX PX's is, and anything else is the ttl range error.

// scriptTTL is a recognised script's ttl argument n as a ttl within
// [min_ttl, max_ttl]: n units, or with m.At the time left until the Unix
// time n (read on this proxy's clock, as SET … PXAT is). near reports a
// deadline less than min_ttl away, now, past, or beyond what Redis
// accepts: no lock the proxy could grant or extend, but a call one Redis
// answers (it sets the expiry for those few ms, deletes the key, or
// refuses the time). With long, a ttl beyond max_ttl is one the proxy
// holds (as SET NX PX's: ttlHeld); otherwise it is the ttl range error.
func (d *Dispatcher) scriptTTL(n int64, m *lua.Meaning, long bool) (ttl time.Duration, near bool, r Reply) {
	in := d.ttlIn
	if long {
		in = d.ttlHeld
	}
	if !m.At {
		ttl, r = in(n, m.Unit)
		return ttl, false, r
	}
	when, ok := lua.ExpireAt(n, m.Unit == time.Second, true, 0)
	if !ok {
		return 0, true, nil
	}
	left := time.Until(time.UnixMilli(when))
	if left < d.opts.MinTTL {
		return left, true, nil
	}
	ttl, r = in(left.Milliseconds(), time.Millisecond)
	return ttl, false, r
}

// runRecognised runs m (already selected for argv) over keys. A deadline too
// near to carry out (scriptTTL) runs the script itself by vote instead, so
// that every backend answers it as one Redis does (its keys' waiters
// wake); where only recognised scripts run, it is the ttl range error.
func (d *Dispatcher) runRecognised(ctx context.Context, s *cachedScript, m *lua.Meaning, keys, argv []string) Reply {
	covered := m.KeysOf(keys)
	switch m.Op {
	case lua.OpAcquire, lua.OpExtend:
		if m.TTL < 1 || m.TTL > len(argv) {
			return errSyntax
		}
		n, err := strconv.ParseInt(argv[m.TTL-1], 10, 64)
		if err != nil {
			return errNotInteger
		}
		// One key taken or set to a ttl (not added to) may be held
		// beyond max_ttl, as SET NX PX and PEXPIRE are.
		long := len(covered) == 1 && (m.Op == lua.OpAcquire || m.Extend != lua.Add)
		ttl, near, r := d.scriptTTL(n, m, long)
		switch {
		case r != nil:
			return r
		case near && d.opts.RecognisedOnly:
			return Errorf(errTTLRange, ttl.Milliseconds(), d.opts.MinTTL.Milliseconds(), d.opts.MaxTTL.Milliseconds())
		case near:
			d.log.Debug("recognised script runs by vote: its deadline is less than min_ttl away", "sha1", s.sha)
			return d.runVote(ctx, nil, s, keys, argv)
		}
		ok, r := d.acquireOrExtend(ctx, m, covered, m.TokenOf(argv), ttl)
		if r != nil {
			return r
		}
		outcome := lua.Denied
		if ok {
			outcome = lua.Granted
		}
		return luaReply(m.ReplyFor(outcome, len(keys), 0))
	case lua.OpRelease:
		states, err := d.leases.ReleaseKeys(ctx, covered, m.TokenOf(argv))
		if err != nil {
			return d.lockError(err)
		}
		outcomes := make([]lua.Outcome, len(states))
		for i, st := range states {
			outcomes[i] = releaseOutcome(st)
		}
		return luaReply(m.ReleaseReply(outcomes, len(keys)))
	case lua.OpRead:
		return d.evalRead(ctx, s, keys, argv)
	}
	return errInternal
}

// acquireOrExtend runs an acquire or an extend of keys and reports whether
// it was done: false when another owner holds them (acquire) or they are
// not all held by token (extend).
func (d *Dispatcher) acquireOrExtend(ctx context.Context, m *lua.Meaning, keys []string, token string, ttl time.Duration) (bool, Reply) {
	var err error
	if m.Op == lua.OpAcquire {
		mode := redlock.IfAbsent
		if m.Acquire == lua.IfAbsentOrMine {
			mode = redlock.IfAbsentOrMine
		}
		err = d.leases.AcquireScript(ctx, keys, token, ttl, mode)
	} else {
		mode := redlock.Replace
		if m.Extend == lua.Add {
			mode = redlock.Add
		}
		_, err = d.leases.Extend(ctx, keys, token, ttl, mode)
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redlock.ErrHeld), errors.Is(err, redlock.ErrNotHeld):
		return false, nil
	}
	return false, d.lockError(err)
}

func releaseOutcome(s redlock.KeyState) lua.Outcome {
	switch s {
	case redlock.Released:
		return lua.Released
	case redlock.Absent:
		return lua.Absent
	}
	return lua.Other
}

// evalRead answers a read-only script by running it against what a quorum
// holds for each key it reads (the PTTL rule of docs/compatibility.md; a
// key this proxy keeps reads without expiry).
// A run whose reply only a backend writes as Redis does (lua.ErrByVote)
// runs by vote instead.
func (d *Dispatcher) evalRead(ctx context.Context, s *cachedScript, keys, argv []string) Reply {
	var readErr error
	v, err := s.analysis().EvalRead(keys, argv, func(key string) lua.KeyView {
		val, err := d.leases.Read(ctx, key)
		if err != nil {
			readErr = err
			return lua.KeyView{}
		}
		return lua.KeyView{Exists: val.Exists, Value: val.Data, PTTL: val.PTTL}
	})
	switch {
	case readErr != nil:
		return d.lockError(readErr)
	case errors.Is(err, lua.ErrByVote) && !d.opts.RecognisedOnly:
		return d.runVote(ctx, nil, s, keys, argv)
	case err != nil:
		d.log.Warn("read-only script gave up", "error", err)
		return Errorf("ERR redlock-proxy could not run this read-only script: %v", err)
	}
	return luaReply(v)
}

// luaReply turns a script's reply into a Reply.
func luaReply(v lua.Value) Reply {
	switch v.Kind {
	case lua.Int:
		return Int(v.Int)
	case lua.Bulk:
		return BulkString(v.Str)
	case lua.Status:
		return Simple(v.Str)
	case lua.Err:
		return Error(v.Str)
	case lua.Array:
		out := make(Array, len(v.Elems))
		for i, e := range v.Elems {
			out[i] = luaReply(e)
		}
		return out
	}
	return Null{}
}
