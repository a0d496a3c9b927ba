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

// stampsKey is the hash, beside the record, of each held key's copy on
// that node: the absolute expiry (PEXPIRETIME, ms) the hold's last write
// gave it. A copy whose expiry differs was written since by someone else
// (deleted and taken again, overwritten with an expiry, given one): the
// hold is no longer its own, whatever value it holds. A field without a
// stamp is checked by its digest alone.
func stampsKey(service string) string { return ReservedPrefix + "holds-at:" + service }

// stampLua, the start of every script that reads or writes stamps,
// defines stamp(k): the expiry of k's copy as a stamp, or false where the
// backend has no PEXPIRETIME (before Redis 7.0, or an ACL without it):
// there no stamp is written, and a hold is checked by its digest alone.
const stampLua = `local function stamp(k)
	local t = redis.pcall("PEXPIRETIME", k)
	if type(t) ~= "number" then return false end
	return string.format("%.0f", t)
end
`

// holdsValueLua defines holdsValue(k, digest): whether key k holds the
// value whose SHA1 is digest (AnyDigest: any value, while k exists).
const holdsValueLua = `local function holdsValue(k, digest)
	if digest == "*" then return redis.call("EXISTS", k) == 1 end
	local v = redis.pcall("GET", k)
	return type(v) == "string" and redis.sha1hex(v) == digest
end
`

// dropHoldLua defines dropHold(k, f, at): the hold of key k (its field f,
// stamped at) no longer holds, and its field and stamp go. A copy still
// the hold's own (its expiry the one the hold stamped) whose value
// changed in place (APPEND, INCR, SETRANGE, SET KEEPTTL through a proxy
// that did not know it held) is the client's data now, as on one Redis:
// it is given the client's expiry, none or the hold's deadline. A copy
// written since by someone else (another expiry) is left as it is.
const dropHoldLua = `local function dropHold(k, f, at)
	if at and at == stamp(k) and redis.call("EXISTS", k) == 1 then
		local deadline = string.match(f, "^%S+ (%S+) ")
		if deadline == "0" then redis.call("PERSIST", k) elseif deadline then redis.call("PEXPIREAT", k, deadline) end
	end
	redis.call("HDEL", KEYS[1], k)
	redis.call("HDEL", KEYS[2], k)
end
`

// holdKeys are the keys of a script on the record of service.
func holdKeys(service string) []string { return []string{HoldsKey(service), stampsKey(service)} }

// HandedOver begins the owner of a hold whose proxy gave it up, followed
// by that proxy's id ("-" then 40 hex digits): any live proxy claims it.
const HandedOver = "-"

// Ended is the owner of a hold that a write through a proxy that did not
// keep it ended (an expiry given to the value it holds): nobody renews or
// claims it, and it is deleted once its key no longer holds the value.
const Ended = "~"

// AnyDigest is the digest of a hold of any value: a key of any type,
// kept while it exists.
const AnyDigest = "*"

// Hold is one field of the record.
type Hold struct {
	Key      string
	Owner    string // a tier member id, HandedOver and one, or Ended
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

// setHoldScript writes field ARGV[1] of hash KEYS[1] as ARGV[2]. With
// an owner ARGV[3] (not empty) it is a compare-and-set: a field must name
// that owner (else 0), and an absent field is written only by its own
// maker (ARGV[3] is the new owner ARGV[4]), not claimed (-1). Without an
// owner (the maker of a hold), it is written only where the key ARGV[1]
// holds the value of the field's digest (any value for "*"): of two
// writers of one key that overlapped, the loser's record does not replace
// the winner's; and the key copy's expiry is stamped in KEYS[2]. 1
// written.
var setHoldScript = NewScript(stampLua + `
local f = redis.call("HGET", KEYS[1], ARGV[1])
if ARGV[3] ~= "" then
	if f then
		if string.match(f, "^(%S+) ") ~= ARGV[3] then return 0 end
	elseif ARGV[3] ~= ARGV[4] then
		return -1
	end
else
	local d, t = string.match(ARGV[2], "(%S+)$"), redis.call("TYPE", ARGV[1]).ok
	if d == "*" then
		if t == "none" then return 0 end
	elseif t ~= "string" or redis.sha1hex(redis.call("GET", ARGV[1])) ~= d then
		return 0
	end
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == "" or not f then
	local s = stamp(ARGV[1]) if s then redis.call("HSET", KEYS[2], ARGV[1], s) end
end
return 1`)

// dropHoldScript deletes field ARGV[1] of hash KEYS[1] (and its stamp
// in KEYS[2]) if it names owner ARGV[2]: 1 deleted or absent, 0 another
// owner's.
var dropHoldScript = NewScript(`
local f = redis.call("HGET", KEYS[1], ARGV[1])
if f and string.match(f, "^(%S+) ") ~= ARGV[2] then
	return 0
end
redis.call("HDEL", KEYS[1], ARGV[1])
redis.call("HDEL", KEYS[2], ARGV[1])
return 1`)

// endHoldScript sets the owner of field ARGV[1] of hash KEYS[1] to
// ARGV[2], if there is one and, with a digest ARGV[3], the key ARGV[1]
// holds the value of that digest: 1, else 0.
var endHoldScript = NewScript(holdsValueLua + `
local f = redis.call("HGET", KEYS[1], ARGV[1])
if not f then return 0 end
if ARGV[3] ~= "" and not holdsValue(ARGV[1], ARGV[3]) then return 0 end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2] .. (string.match(f, "^%S+( .*)$") or " 0 -"))
return 1`)

// handOverScript sets the owner of every field naming ARGV[2] to ARGV[3]
// in one page of hash KEYS[1] (HSCAN from cursor ARGV[1]): it returns the
// next cursor and how many it set (onRecordPages).
var handOverScript = NewScript(`
local n, r = 0, redis.call("HSCAN", KEYS[1], ARGV[1], "COUNT", 100)
for i = 1, #r[2], 2 do
	local owner, rest = string.match(r[2][i + 1], "^(%S+)( .*)$")
	if owner == ARGV[2] then
		redis.call("HSET", KEYS[1], r[2][i], ARGV[3] .. rest)
		n = n + 1
	end
end
return {r[1], n}`)

// SetHold writes h to the record of service on every node. With owner
// empty it writes whatever the field holds, where the key holds the
// value of h's digest (the maker of a hold, which has just written the
// key); else where the field names owner (a claim
// passes the owner it saw), or is absent and owner is h.Owner. It succeeds
// once a quorum wrote it; else ErrHeld (another owner on a quorum's
// fields) or ErrNoQuorum, as a *QuorumError.
func (r *Redlock) SetHold(ctx context.Context, service string, h Hold, owner string) error {
	if h.Key == "" || h.Owner == "" || strings.ContainsAny(h.Owner+h.Digest, " ") || h.Digest == "" {
		return fmt.Errorf("%w: hold %+v", ErrInvalid, h)
	}
	return r.holdOp(ctx, "set hold", setHoldScript, service, []any{h.Key, h.field(), owner, h.Owner}, ErrHeld, false)
}

// DropHold deletes the field of key from the record of service where it
// names owner. It succeeds once a quorum deleted it (or lacked it).
func (r *Redlock) DropHold(ctx context.Context, service, key, owner string) error {
	return r.holdOp(ctx, "drop hold", dropHoldScript, service, []any{key, owner}, ErrNotHeld, false)
}

// EndHold marks the hold of key in the record of service as Ended,
// whoever owns it: its owner's next renewal stops it (ErrHeld) and no
// proxy claims it. With a digest (of a value released or extended: a
// SHA1, hex), only on a node where key still holds that value: a
// release of a token that no longer holds the key (a client repeating
// its release through another proxy, after the key was taken again)
// must not end the current holder's hold. It succeeds once a quorum did
// it (or had no field, or another value).
func (r *Redlock) EndHold(ctx context.Context, service, key, digest string) error {
	return r.holdOp(ctx, "end hold", endHoldScript, service, []any{key, Ended, digest}, ErrNoQuorum, true)
}

// holdOp runs s on every node: a 1 is a yes (with anyYes, every answer is).
func (r *Redlock) holdOp(ctx context.Context, op string, s *Script, service string, args []any, no error, anyYes bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	decode := intIs1
	if anyYes {
		decode = func(v any) (bool, error) { _, err := asInt(v); return err == nil, err }
	}
	c := call[bool]{cmd: command{kind: callEval, script: s, keys: holdKeys(service), args: args}, decode: decode}
	t := r.tally()
	if err := quorum(r, ctx, op, r.nodeTimeout, c, decider[bool](t), nil); err != nil {
		return err
	}
	if !t.won() {
		return t.failure(no)
	}
	return nil
}

// RenewHold gives h.Key a lease of ttl on every node where h's owner
// still owns its field and the key holds the value of h.Digest. It
// succeeds once a quorum renewed it; else ErrHeld when a quorum's fields
// name another owner (a peer took it over), ErrNotHeld when a quorum's
// key no longer holds that value, or ErrNoQuorum (anything short of
// those, e.g. renewed on one node, gone on one, no answer from a third),
// as a *QuorumError.
//
// With migrate_from the key's copy on the old instance is renewed too, and
// the renewal needs its yes (mirrorRenew): a MigrateError of kind
// ErrNotHeld when the copy there is gone (the hold ends), of kind
// ErrNoQuorum when the old instance did not answer.
func (r *Redlock) RenewHold(ctx context.Context, service string, h Hold, ttl time.Duration) error {
	if h.Key == "" || h.Owner == "" || strings.HasPrefix(h.Owner, HandedOver) || h.Digest == "" || ttl <= 0 {
		return fmt.Errorf("%w: renew hold %+v for %v", ErrInvalid, h, ttl)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("renew hold: %w", err)
	}
	return r.mirrorRenew(ctx, h.Key, h.Digest, ttl)(r.renewHolds(ctx, service, []Hold{h}, ttl)[0])
}

// renewHoldsScript renews holds of one owner: KEYS are the record, its
// stamps and the held keys; ARGV the owner, the lease (ms), then a field
// and a digest (AnyDigest: any value, while the key exists) per held key.
// It returns one code per held key. Where the field is absent (never
// written here, or dropped by a release) it is not this owner's to
// renew: -1. Where it names another owner (a peer took it over, or a
// write ended it), 0. Where the key no longer holds the value, or its copy
// is not the one the hold stamped (written since by someone else), this
// owner's field of this value is dropped (dropHold: a copy still its own
// whose value changed in place is the client's data now) and -1. Else
// the key's lease becomes the lease, the field is written where it
// differs, the copy's new expiry stamped, and 1.
var renewHoldsScript = NewScript(stampLua + holdsValueLua + dropHoldLua + `
local out = {}
for i = 3, #KEYS do
	local k, j = KEYS[i], 2 * (i - 2) + 1
	local want, digest = ARGV[j], ARGV[j + 1]
	local f = redis.call("HGET", KEYS[1], k)
	local code = 1
	if not f then
		code = -1
	else
		local owner, _, d = string.match(f, "^(%S+) (%S+) (%S+)$")
		if owner ~= ARGV[1] then
			code = 0
		else
			local at = redis.call("HGET", KEYS[2], k)
			if at and at ~= stamp(k) or not holdsValue(k, digest) then
				if d == digest then dropHold(k, f, at) end
				code = -1
			else
				redis.call("PEXPIRE", k, ARGV[2])
				if f ~= want then redis.call("HSET", KEYS[1], k, want) end
				local s = stamp(k) if s then redis.call("HSET", KEYS[2], k, s) end
			end
		end
	end
	out[#out + 1] = code
end
return out`)

// RenewHolds is RenewHold of many holds of one owner in one call per
// node (a page of what is due), each decided on its own: its error, nil
// when renewed on a quorum. Holds renewed during a move (migrate_from)
// go one by one (RenewHold), the old instance's yes needed for each.
func (r *Redlock) RenewHolds(ctx context.Context, service string, hs []Hold, ttl time.Duration) []error {
	if r.migrate != nil {
		errs := make([]error, len(hs))
		for i, h := range hs {
			errs[i] = r.RenewHold(ctx, service, h, ttl)
		}
		return errs
	}
	return r.renewHolds(ctx, service, hs, ttl)
}

// renewHolds is RenewHolds on the backends, each hold decided as
// RenewHold says: nil renewed on a quorum; ErrHeld, ErrNotHeld when a
// quorum said so; else ErrNoQuorum (renewed on some, gone on some, no
// answer from others: tried again while it lasts).
func (r *Redlock) renewHolds(ctx context.Context, service string, hs []Hold, ttl time.Duration) []error {
	errs := make([]error, len(hs))
	keys := holdKeys(service)
	args := []any{"", millis(ttl)}
	for i, h := range hs {
		if h.Key == "" || h.Owner == "" || strings.HasPrefix(h.Owner, HandedOver) || h.Digest == "" || ttl <= 0 {
			for j := range errs {
				errs[j] = fmt.Errorf("%w: renew hold %+v for %v", ErrInvalid, hs[i], ttl)
			}
			return errs
		}
		args[0] = h.Owner
		keys = append(keys, h.Key)
		args = append(args, h.field(), h.Digest)
	}
	c := call[[]int64]{
		cmd:    command{kind: callEval, script: renewHoldsScript, keys: keys, args: args},
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
		case e.taken >= e.q:
			errs[i] = e.failure(ErrHeld)
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

// renewTally counts renewals (1) as yes, fields of another owner (0) and
// keys that no longer hold the value (-1).
type renewTally struct {
	tally
	taken, gone int
}

func (t *renewTally) add(n int64) {
	t.tally.add(n == 1)
	switch n {
	case 0:
		t.taken++
	case -1:
		t.gone++
	}
}

// scanHoldsScript reads one page of hash KEYS[1] (HSCAN from cursor
// ARGV[1]) and returns the next cursor, then for each field whose key
// holds the value of its digest, in the copy stamped in KEYS[2] (when
// stamped), the key, the field and the key's PTTL; the other fields
// (released, overwritten, expired, written again by someone else,
// changed in place) it drops (dropHold).
var scanHoldsScript = NewScript(stampLua + holdsValueLua + dropHoldLua + `
local r = redis.call("HSCAN", KEYS[1], ARGV[1], "COUNT", 100)
local out = {r[1]}
for i = 1, #r[2], 2 do
	local k, f = r[2][i], r[2][i + 1]
	local ok = holdsValue(k, string.match(f, " (%S+)$"))
	local at = redis.call("HGET", KEYS[2], k)
	if ok and at and at ~= stamp(k) then ok = false end
	if ok then
		out[#out + 1] = k
		out[#out + 1] = f
		out[#out + 1] = redis.call("PTTL", k)
	else
		dropHold(k, f, at)
	end
end
return out`)

// ScannedHold is a hold that a quorum of nodes record for a key holding
// its value: Owner is the one most of them name, Lease how long a quorum
// of the key's copies lives at least.
type ScannedHold struct {
	Hold
	Lease time.Duration
}

// decodeScan reads one node's scan, its pages' items in one list: each
// hold with its key's PTTL there, once (HSCAN may return a field twice).
func decodeScan(a []any) ([]ScannedHold, error) {
	if len(a)%3 != 0 {
		return nil, fmt.Errorf("scan holds: %d items", len(a))
	}
	out := make([]ScannedHold, 0, len(a)/3)
	at := make(map[string]int, len(a)/3)
	for i := 0; i < len(a); i += 3 {
		k, _ := a[i].(string)
		f, _ := a[i+1].(string)
		ms, ok := a[i+2].(int64)
		if !ok {
			return nil, fmt.Errorf("scan holds: pttl %T", a[i+2])
		}
		h, err := parseHold(k, f)
		if err != nil {
			continue // not ours to read: left alone
		}
		if j, ok := at[k]; ok {
			out[j] = ScannedHold{Hold: h, Lease: pttl(ms)} // the later read
			continue
		}
		at[k] = len(out)
		out = append(out, ScannedHold{Hold: h, Lease: pttl(ms)})
	}
	return out, nil
}
