package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The holds record (docs/safety.md, "Holds"): one hash per tier on every
// node, one field per key the tier keeps beyond max_ttl, "owner
// deadline-ms digest". These are its quorum writes; the renewal and the
// claims that read it build on them.

// HoldsKey is the hash of the holds of the tier service.
func HoldsKey(service string) string { return ReservedPrefix + "holds:" + service }

// HandedOver is the owner of a hold whose proxy gave it up: any live
// proxy claims it.
const HandedOver = "-"

// Hold is one field of the record.
type Hold struct {
	Key      string
	Owner    string // a tier member id, or HandedOver
	Deadline int64  // the client's expiry, Unix ms; 0: none
	Digest   string // sha1 of the value held, hex
}

func (h Hold) field() string {
	return h.Owner + " " + strconv.FormatInt(h.Deadline, 10) + " " + h.Digest
}

// parseHold reads a field of the record.
func parseHold(key, field string) (Hold, error) {
	p := strings.Fields(field)
	if len(p) != 3 {
		return Hold{}, fmt.Errorf("hold of %q: %q is not \"owner deadline digest\"", key, field)
	}
	d, err := strconv.ParseInt(p[1], 10, 64)
	if err != nil || d < 0 {
		return Hold{}, fmt.Errorf("hold of %q: deadline %q", key, p[1])
	}
	return Hold{Key: key, Owner: p[0], Deadline: d, Digest: p[2]}, nil
}

// setHoldScript writes field ARGV[1] of hash KEYS[1] unless it names
// another owner than ARGV[3] (empty: any): 1 written, 0 not.
var setHoldScript = NewScript(`
local f = redis.call("HGET", KEYS[1], ARGV[1])
if f and ARGV[3] ~= "" and string.match(f, "^(%S+) ") ~= ARGV[3] then
	return 0
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
return 1`)

// dropHoldScript deletes field ARGV[1] of hash KEYS[1] if it names owner
// ARGV[2]: 1 deleted or absent, 0 another owner's.
var dropHoldScript = NewScript(`
local f = redis.call("HGET", KEYS[1], ARGV[1])
if f and string.match(f, "^(%S+) ") ~= ARGV[2] then
	return 0
end
redis.call("HDEL", KEYS[1], ARGV[1])
return 1`)

// handOverScript sets the owner of every field of hash KEYS[1] naming
// ARGV[1] to ARGV[2]; it returns how many.
var handOverScript = NewScript(`
local n, cursor = 0, "0"
repeat
	local r = redis.call("HSCAN", KEYS[1], cursor, "COUNT", 100)
	cursor = r[1]
	for i = 1, #r[2], 2 do
		local owner, rest = string.match(r[2][i + 1], "^(%S+)( .*)$")
		if owner == ARGV[1] then
			redis.call("HSET", KEYS[1], r[2][i], ARGV[2] .. rest)
			n = n + 1
		end
	end
until cursor == "0"
return n`)

// SetHold writes h to the record of service on every node, where the
// field is absent or names owner (empty: whatever it names): a claim
// passes the owner it saw, the maker of a hold its own id. It succeeds
// once a quorum wrote it; else ErrHeld (another owner on a quorum's
// fields) or ErrNoQuorum, as a *QuorumError.
func (r *Redlock) SetHold(ctx context.Context, service string, h Hold, owner string) error {
	if h.Key == "" || h.Owner == "" || strings.ContainsAny(h.Owner+h.Digest, " ") || h.Digest == "" {
		return fmt.Errorf("%w: hold %+v", ErrInvalid, h)
	}
	return r.holdOp(ctx, "set hold", setHoldScript, service, []any{h.Key, h.field(), owner}, ErrHeld)
}

// DropHold deletes the field of key from the record of service where it
// names owner. It succeeds once a quorum deleted it (or lacked it).
func (r *Redlock) DropHold(ctx context.Context, service, key, owner string) error {
	return r.holdOp(ctx, "drop hold", dropHoldScript, service, []any{key, owner}, ErrNotHeld)
}

func (r *Redlock) holdOp(ctx context.Context, op string, s *Script, service string, args []any, no error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	c := call[bool]{cmd: command{kind: callEval, script: s, keys: []string{HoldsKey(service)}, args: args}, decode: intIs1}
	t := r.tally()
	if err := quorum(r, ctx, op, r.nodeTimeout, c, decider[bool](t), nil); err != nil {
		return err
	}
	if !t.won() {
		return t.failure(no)
	}
	return nil
}

// HandOverHolds marks every hold of owner in the record of service as
// handed over, on every node; it returns the most any node counted, once
// a quorum did it.
func (r *Redlock) HandOverHolds(ctx context.Context, service, owner string) (int, error) {
	if owner == "" || owner == HandedOver {
		return 0, fmt.Errorf("%w: hand over the holds of %q", ErrInvalid, owner)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("hand over holds: %w", err)
	}
	c := call[int64]{
		cmd:    command{kind: callEval, script: handOverScript, keys: []string{HoldsKey(service)}, args: []any{owner, HandedOver}},
		decode: asInt,
	}
	t := &countTally{tally: *r.tally()}
	if err := quorum(r, ctx, "hand over holds", r.nodeTimeout, c, decider[int64](t), nil); err != nil {
		return 0, err
	}
	if !t.won() {
		return 0, t.failure(ErrNoQuorum)
	}
	return int(t.most), nil
}

// countTally is a tally of counts: every answer is a yes, and it keeps
// the largest.
type countTally struct {
	tally
	most int64
}

func (t *countTally) add(n int64) {
	t.tally.add(true)
	t.most = max(t.most, n)
}

// renewHoldScript renews the hold of key KEYS[2] in hash KEYS[1] for
// owner ARGV[1]: where the field names another owner, 0; where the key
// no longer holds the value of digest ARGV[3], the field is deleted and
// -1; else the key's lease becomes ARGV[4] ms, a field lost (a node
// restarted) is written back as ARGV[2], and 1.
var renewHoldScript = NewScript(`
local f = redis.call("HGET", KEYS[1], KEYS[2])
if f and string.match(f, "^(%S+) ") ~= ARGV[1] then
	return 0
end
local v = redis.pcall("GET", KEYS[2])
if type(v) ~= "string" or redis.sha1hex(v) ~= ARGV[3] then
	if f then redis.call("HDEL", KEYS[1], KEYS[2]) end
	return -1
end
redis.call("PEXPIRE", KEYS[2], ARGV[4])
if not f then redis.call("HSET", KEYS[1], KEYS[2], ARGV[2]) end
return 1`)

// RenewHold gives h.Key a lease of ttl on every node where h's owner
// still owns its field and the key holds the value of h.Digest. It
// succeeds once a quorum renewed it; else ErrHeld when a quorum's fields
// name another owner (a peer took it over), ErrNotHeld when the key no
// longer holds that value, or ErrNoQuorum, as a *QuorumError.
func (r *Redlock) RenewHold(ctx context.Context, service string, h Hold, ttl time.Duration) error {
	if h.Key == "" || h.Owner == "" || h.Owner == HandedOver || h.Digest == "" || ttl <= 0 {
		return fmt.Errorf("%w: renew hold %+v for %v", ErrInvalid, h, ttl)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("renew hold: %w", err)
	}
	c := call[int64]{
		cmd: command{kind: callEval, script: renewHoldScript, keys: []string{HoldsKey(service), h.Key},
			args: []any{h.Owner, h.field(), h.Digest, millis(ttl)}},
		decode: asInt,
	}
	t := &renewTally{tally: *r.tally()}
	if err := quorum(r, ctx, "renew hold", r.callTimeout(ttl), c, decider[int64](t), nil); err != nil {
		return err
	}
	switch {
	case t.won():
		return nil
	case t.taken >= t.q:
		return t.failure(ErrHeld)
	}
	return t.failure(ErrNotHeld)
}

// renewTally counts renewals (1) as yes, and fields of another owner (0).
type renewTally struct {
	tally
	taken int
}

func (t *renewTally) add(n int64) {
	t.tally.add(n == 1)
	if n == 0 {
		t.taken++
	}
}
