package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Scripts by vote: a client's script that is safe to run on each master
// (its analysis says so; package commands decides) runs on every voting
// backend, and the caller gets the reply a quorum agreed on. There is no
// validity, no rollback and no fence: a partial effect (a lock taken on
// fewer than a quorum) stays until its own ttl.
//
// The replies of every backend that answered within its deadline combine
// as docs/compatibility.md says (agree.go): compared whole, an unordered
// part (the script's Shape) as a multiset, every positive integer agreeing
// with every other; the class a quorum gave alike wins, and answers one
// reply a backend gave in full that a quorum of the class meets or
// exceeds in every positive integer; with no such class, ErrDisagree (a
// kind of ErrNoQuorum), or ErrNoQuorum when fewer than a quorum answered.
//
// A script that builds keys from its declared keys
// (script.Script.ForVote) runs under a prefix hold on every key it may
// build (gateprefix.go) instead of its keys' gate.

// Vote runs script (its source, and its SHA1 for EVALSHA) with keys and
// args on every node, under the keys' gate, waits for every node within
// the script timeout (bounded: scriptkill.go), and returns the reply a
// quorum agreed on: nil, int64, Status, string, []any, or a RedisError
// (the script's error reply, as a value). It fails with a *QuorumError of kind ErrNoQuorum when the
// replies do not combine, and with a *ScriptTimeoutError when the script
// ran past the script timeout on enough nodes that no quorum answered.
func (r *Redlock) Vote(ctx context.Context, s *script.Script, keys []string, args []string) (any, error) {
	v, _, err := r.voteClamp(ctx, s, keys, args, voteAny)
	return v, err
}

// VoteRead is Vote for a script that cannot write (a read by vote: the
// Guarded form of a read-only script, HGETALL, LRANGE …), sent on each
// node's connection apart from the lock calls (backend.RedisNode's bulk): its
// reply may be large, and on the calls' connection every lock call to the
// node would wait behind its bytes. A read has no order to keep with the
// lock calls; the keys' gate is held as for Vote. It runs as EVALSHA_RO:
// a write the caller did not expect (one its analysis of the text missed)
// is refused by the backend itself, as an error reply, so that nothing a
// read runs escapes the clamp of writes.
func (r *Redlock) VoteRead(ctx context.Context, s *script.Script, keys []string, args []string) (any, error) {
	v, _, err := r.voteClamp(ctx, s, keys, args, voteRead)
	return v, err
}

// VoteWrites is Vote for a script that may write (a library's lock script
// that is not recognised). With a Mirror it runs there too, at once, and
// its reply there must combine with the nodes' (package migrate).
func (r *Redlock) VoteWrites(ctx context.Context, s *script.Script, keys []string, args []string) (any, error) {
	v, _, err := r.VoteClamped(ctx, s, keys, args)
	return v, err
}

// VoteClamped is VoteWrites that also returns, for a script made with
// script.Script.Clamped, what a quorum of the nodes reported of each
// declared key (redlock/script, clamp.go; nil for another script).
func (r *Redlock) VoteClamped(ctx context.Context, s *script.Script, keys []string, args []string) (any, []script.Wanted, error) {
	withOld := r.mirror.Vote(ctx, s, keys, args)
	v, w, err := r.voteClamp(ctx, s, keys, args, voteWrite)
	if err = withOld(v, err); err != nil {
		return nil, nil, err
	}
	return v, w, nil
}

// voteKind is how voteClamp sends a script: as any (Vote), as a read on
// the nodes' other connection (VoteRead), or as a write under the keys'
// order lock (VoteClamped).
type voteKind uint8

const (
	voteAny voteKind = iota
	voteRead
	voteWrite
)

// voteClamp is Vote, and for a clamped script (script.Script.Clamped)
// what a quorum reported of each key. A write (voteWrite) holds the keys'
// order lock as long as their gate (order.go).
func (r *Redlock) voteClamp(ctx context.Context, s *script.Script, keys []string, args []string, kind voteKind) (any, []script.Wanted, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("vote: %w", err)
	}
	s = s.Sendable()
	keys = slices.Clone(keys)
	argv := anys(args)
	run := call[any]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: s, Keys: keys, Args: argv, Read: kind == voteRead},
		decode: func(v any) (any, error) { return v, nil },
	}
	var leave func()
	switch {
	case len(keys) > 0 && s.Builds() != nil:
		if slices.Contains(keys, "") {
			// Keys built from "" are any keys: its prefix hold would stop
			// every lock of this proxy while the script runs.
			return nil, nil, fmt.Errorf("%w: an empty key in a script that builds keys from it", ErrInvalid)
		}
		end, err := r.gate.enterBuilt(ctx, keys, s.Builds())
		if err != nil {
			return nil, nil, fmt.Errorf("vote: %w", err)
		}
		leave = end
	case len(keys) > 0:
		pass, err := r.gate.enter(ctx, keys)
		if err != nil {
			return nil, nil, fmt.Errorf("vote: %w", err)
		}
		leave = pass.leave
	}
	if kind == voteWrite {
		release, err := r.order(ctx, keys)
		if err != nil {
			if leave != nil {
				leave()
			}
			return nil, nil, err
		}
		gateLeave := leave
		leave = func() {
			if gateLeave != nil {
				gateLeave()
			}
			release()
		}
	}
	t := &replyTally{counts: r.counts(), clamped: s.IsClamped(), keys: len(keys)}
	err := r.bounded(ctx, func(ctx context.Context, d time.Duration) error {
		return quorum(r, ctx, "vote", d, run, decider[any](t), leave)
	}, &t.counts)
	if err != nil {
		return nil, nil, err
	}
	v, agreed := Combine(t.replies, t.q, s.Reply())
	if agreed < t.q {
		return nil, nil, t.disagreed(agreed)
	}
	var w []script.Wanted
	if s.IsClamped() {
		w = script.CombineReports(keys, t.reports, t.built, t.q)
	}
	return v, w, nil
}

// replyTally collects every node's reply; a script's error reply is a
// reply (its RedisError), a node failure is not.
type replyTally struct {
	counts
	replies []any
	// A clamped script's reports (redlock/script, clamp.go), of keys keys
	// each.
	clamped bool
	keys    int
	reports [][]int64
	built   []map[string]int64
}

func (t *replyTally) add(v any) {
	t.answered++
	if t.clamped {
		if reply, report, built, ok := script.SplitClamped(v, t.keys); ok {
			v = reply
			t.reports = append(t.reports, report)
			t.built = append(t.built, built)
		}
	}
	t.replies = append(t.replies, v)
}

func (t *replyTally) fail(err error) {
	var re RedisError
	switch {
	case errors.As(err, &re) && !errors.Is(err, ErrNotVoting):
		t.add(re)
	case resp.Skipped(err):
		// The backend answered in full, past the reader's bounds: its
		// reply is that error, for the client, as a quorum says.
		t.add(skippedReply(err))
	default:
		t.counts.fail(err)
	}
}

// skippedReply is the error reply a client gets for a reply that was past
// the reader's bounds (resp.Skipped).
func skippedReply(err error) RedisError {
	if errors.Is(err, resp.ErrTooDeep) {
		return RedisError("ERR " + resp.ErrTooDeep.Error())
	}
	return RedisError("ERR " + resp.ErrTooLarge.Error())
}
