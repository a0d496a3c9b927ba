package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/record"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The holds record (docs/safety.md, "Holds"): one hash per tier on every
// node, one field per key the tier keeps beyond max_ttl, "deadline-ms
// digest", written with the key's copy by the same call where it can be
// (AcquireHold). A field names no owner: any live proxy renews any hold,
// with a compare-by-value script, a page of holds at a time. A field
// whose key no longer holds its value in the copy it stamped is dead,
// and whichever script reads it next drops it. Package record has its
// format and the scripts each node runs; these are its quorum writes,
// the renewal and the scans that read it (holdsread.go) build on them.

// SetHold writes h to the record of service on every node where the key
// holds the value of h's digest: the maker of a hold, which has just
// written the key and could not record it in the same call. It succeeds
// once a quorum wrote it; else ErrNotHeld or ErrNoQuorum, as a
// *QuorumError.
func (r *Redlock) SetHold(ctx context.Context, service string, h record.Field) error {
	if !h.Valid() {
		return fmt.Errorf("%w: hold %+v", ErrInvalid, h)
	}
	return r.holdOp(ctx, "set hold", record.SetScript, service, []any{h.Key, h.Encode()}, ErrNotHeld, false)
}

// EndHold deletes the hold of key from the record of service: no proxy
// renews it after. With a digest (of a value released or extended: a
// SHA1, hex), only on a node where key still holds that value: a
// release of a token that no longer holds the key (a client repeating
// its release through another proxy, after the key was taken again)
// must not end the current holder's hold. It succeeds once a quorum did
// it (or had no field, or another value).
func (r *Redlock) EndHold(ctx context.Context, service, key, digest string) error {
	return r.holdOp(ctx, "end hold", record.EndScript, service, []any{key, digest}, ErrNoQuorum, true)
}

// holdOp runs s on every node: a 1 is a yes (with anyYes, every answer is).
func (r *Redlock) holdOp(ctx context.Context, op string, s *script.Script, service string, args []any, no error, anyYes bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	decode := intIs1
	if anyYes {
		decode = func(v any) (bool, error) { _, err := asInt(v); return err == nil, err }
	}
	c := call[bool]{cmd: backend.Command{Kind: backend.CallEval, Script: s, Keys: record.Keys(service), Args: args}, decode: decode}
	return r.quorumYes(ctx, op, r.nodeTimeout, c, no)
}

// RenewHold gives h.Key a lease of ttl, or what is left to the deadline
// its field names when that is less, on every node where its field is of
// h's digest and the key
// holds the value of h.Digest in the copy the field stamped. Any proxy
// may renew any hold: the renewal compares, it does not own. It
// succeeds once a quorum renewed it; else ErrNotHeld when a quorum's
// field is gone or another or its key no longer holds that value (the
// hold ended), or ErrNoQuorum (anything short of those, e.g. renewed on
// one node, gone on one, no answer from a third), as a *QuorumError.
//
// With a Mirror the key's copy there is renewed too, and the renewal
// needs its yes (package migrate: a copy gone there ends the hold).
func (r *Redlock) RenewHold(ctx context.Context, service string, h record.Field, ttl time.Duration) error {
	if !h.Valid() || ttl <= 0 {
		return fmt.Errorf("%w: renew hold %+v for %v", ErrInvalid, h, ttl)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("renew hold: %w", err)
	}
	return r.mirror.RenewHold(ctx, h.Key, h.Digest, ttl)(r.renewHolds(ctx, service, []record.Field{h}, ttl)[0])
}

// RenewCopy runs record.RenewCopyScript on every node (a Mirror's copy
// of a held key): nil once a quorum renewed, else a *QuorumError of kind
// ErrNotHeld or ErrNoQuorum.
func (r *Redlock) RenewCopy(ctx context.Context, key, digest string, ttl time.Duration) error {
	c := call[bool]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: record.RenewCopyScript, Keys: []string{key}, Args: []any{digest, backend.Millis(ttl)}},
		decode: intIs1,
	}
	return r.quorumYes(ctx, "renew hold", r.nodeTimeout, c, ErrNotHeld)
}

// RenewHolds is RenewHold of many holds in one call per node (a page of
// what is due), each decided on its own: its error, nil when renewed on
// a quorum. Holds renewed with a Mirror go one by one (RenewHold), its
// yes needed for each.
func (r *Redlock) RenewHolds(ctx context.Context, service string, hs []record.Field, ttl time.Duration) []error {
	if _, none := r.mirror.(noMirror); !none {
		errs := make([]error, len(hs))
		for i, h := range hs {
			errs[i] = r.RenewHold(ctx, service, h, ttl)
		}
		return errs
	}
	return r.renewHolds(ctx, service, hs, ttl)
}

// renewHolds is RenewHolds on the backends, each hold decided as
// RenewHold says: nil renewed on a quorum; ErrNotHeld when a quorum said
// so (ended, or its deadline passed: it expires by itself); else ErrNoQuorum
// (renewed on some, gone on some, no answer from others: tried again
// while it lasts).
func (r *Redlock) renewHolds(ctx context.Context, service string, hs []record.Field, ttl time.Duration) []error {
	errs := make([]error, len(hs))
	keys := record.Keys(service)
	args := []any{r.now().UnixMilli(), backend.Millis(ttl)}
	for i, h := range hs {
		if !h.Valid() || ttl <= 0 {
			for j := range errs {
				errs[j] = fmt.Errorf("%w: renew hold %+v for %v", ErrInvalid, hs[i], ttl)
			}
			return errs
		}
		keys = append(keys, h.Key)
		args = append(args, h.Digest)
	}
	c := call[[]int64]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: record.RenewScript, Keys: keys, Args: args},
		decode: func(v any) ([]int64, error) { return asInts(v, len(hs)) },
	}
	t := &renewsTally{each: make([]renewTally, len(hs))}
	for i := range t.each {
		t.each[i] = renewTally{tally: *r.tally()}
	}
	if err := quorum(r, ctx, "renew holds", r.nodeTimeout, c, decider[[]int64](t), nil); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i := range t.each {
		e := &t.each[i]
		switch {
		case e.won():
		case e.gone >= e.q:
			errs[i] = e.failure(ErrNotHeld)
		default:
			errs[i] = e.failure(ErrNoQuorum)
		}
	}
	return errs
}

// renewsTally is a renewTally per hold of one RenewHolds call.
type renewsTally struct{ each []renewTally }

func (t *renewsTally) add(v []int64) {
	for i := range t.each {
		t.each[i].add(v[i])
	}
}

func (t *renewsTally) fail(err error) {
	for i := range t.each {
		t.each[i].fail(err)
	}
}

func (t *renewsTally) lost() bool { return false }

func (t *renewsTally) done() bool {
	for i := range t.each {
		if !t.each[i].done() {
			return false
		}
	}
	return true
}

// renewTally counts renewals (1) as yes, and holds ended (-1).
type renewTally struct {
	tally
	gone int
}

func (t *renewTally) add(n int64) {
	t.tally.add(n == 1)
	if n == -1 {
		t.gone++
	}
}
