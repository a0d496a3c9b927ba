package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The holds record (docs/safety.md, "Holds"): one hash per tier on every
// node, one field per key the tier keeps beyond max_ttl, "deadline-ms
// digest", written with the key's copy by the same call where it can be
// (AcquireHold). A field names no owner: any live proxy renews any hold,
// with a compare-by-value script, a page of holds at a time. A field
// whose key no longer holds its value in the copy it stamped is dead,
// and whichever script reads it next drops it. These are its quorum
// writes; the renewal and the scans that read it build on them.

// RecordKey is the hash of the holds of the tier service.
func RecordKey(service string) string { return ReservedPrefix + "holds:" + service }

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
		local deadline = string.match(f, "(%S+) %S+$")
		if deadline == "0" then redis.call("PERSIST", k) elseif deadline then redis.call("PEXPIREAT", k, deadline) end
	end
	redis.call("HDEL", KEYS[1], k)
	redis.call("HDEL", KEYS[2], k)
end
`

// recordKeys are the keys of a script on the record of service.
func recordKeys(service string) []string { return []string{RecordKey(service), stampsKey(service)} }

// AnyDigest is the digest of a hold of any value: a key of any type,
// kept while it exists.
const AnyDigest = "*"

// HoldField is one field of the record: a hold as the backends keep it
// (lease.Hold is what a client asked for, in one proxy's memory).
type HoldField struct {
	Key      string
	Deadline int64  // the client's expiry, Unix ms; 0: none
	Digest   string // sha1 of the value held, hex; AnyDigest
}

func (h HoldField) field() string { return strconv.FormatInt(h.Deadline, 10) + " " + h.Digest }

// valid reports whether h can be written to the record.
func (h HoldField) valid() bool {
	return h.Key != "" && h.Digest != "" && !strings.Contains(h.Digest, " ")
}

// parseHold reads a field of the record. A field an older proxy wrote
// ("owner deadline digest") reads as its deadline and digest; one it
// marked ended (owner "~") as no hold.
func parseHold(key, field string) (HoldField, error) {
	p := strings.Fields(field)
	switch {
	case len(p) == 3 && p[0] != "~":
		p = p[1:]
	case len(p) != 2:
		return HoldField{}, fmt.Errorf("hold of %q: %q is not \"deadline digest\"", key, field)
	}
	d, err := strconv.ParseInt(p[0], 10, 64)
	if err != nil || d < 0 {
		return HoldField{}, fmt.Errorf("hold of %q: deadline %q", key, p[0])
	}
	return HoldField{Key: key, Deadline: d, Digest: p[1]}, nil
}

// setHoldScript writes field ARGV[1] of hash KEYS[1] as ARGV[2] where
// the key ARGV[1] holds the value of the field's digest (any value for
// "*"), and stamps the key copy's expiry in KEYS[2]: of two writers of one
// key that overlapped, the loser's record does not replace the winner's.
// 1 written, 0 not.
var setHoldScript = script.New(stampLua + holdsValueLua + `
if not holdsValue(ARGV[1], string.match(ARGV[2], "(%S+)$")) then return 0 end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
local s = stamp(ARGV[1]) if s then redis.call("HSET", KEYS[2], ARGV[1], s) end
return 1`)

// endHoldScript deletes field ARGV[1] of hash KEYS[1] and its stamp, if
// there is one and, with a digest ARGV[2], the key ARGV[1] holds the
// value of that digest: 1, else 0.
var endHoldScript = script.New(holdsValueLua + `
if not redis.call("HGET", KEYS[1], ARGV[1]) then return 0 end
if ARGV[2] ~= "" and not holdsValue(ARGV[1], ARGV[2]) then return 0 end
redis.call("HDEL", KEYS[1], ARGV[1])
redis.call("HDEL", KEYS[2], ARGV[1])
return 1`)

// SetHold writes h to the record of service on every node where the key
// holds the value of h's digest: the maker of a hold, which has just
// written the key and could not record it in the same call. It succeeds
// once a quorum wrote it; else ErrNotHeld or ErrNoQuorum, as a
// *QuorumError.
func (r *Redlock) SetHold(ctx context.Context, service string, h HoldField) error {
	if !h.valid() {
		return fmt.Errorf("%w: hold %+v", ErrInvalid, h)
	}
	return r.holdOp(ctx, "set hold", setHoldScript, service, []any{h.Key, h.field()}, ErrNotHeld, false)
}

// EndHold deletes the hold of key from the record of service: no proxy
// renews it after. With a digest (of a value released or extended: a
// SHA1, hex), only on a node where key still holds that value: a
// release of a token that no longer holds the key (a client repeating
// its release through another proxy, after the key was taken again)
// must not end the current holder's hold. It succeeds once a quorum did
// it (or had no field, or another value).
func (r *Redlock) EndHold(ctx context.Context, service, key, digest string) error {
	return r.holdOp(ctx, "end hold", endHoldScript, service, []any{key, digest}, ErrNoQuorum, true)
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
	c := call[bool]{cmd: command{kind: callEval, script: s, keys: recordKeys(service), args: args}, decode: decode}
	t := r.tally()
	if err := quorum(r, ctx, op, r.nodeTimeout, c, decider[bool](t), nil); err != nil {
		return err
	}
	if !t.won() {
		return t.failure(no)
	}
	return nil
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
// With migrate_from the key's copy on the old instance is renewed too, and
// the renewal needs its yes (mirrorRenew): a MigrateError of kind
// ErrNotHeld when the copy there is gone (the hold ends), of kind
// ErrNoQuorum when the old instance did not answer.
func (r *Redlock) RenewHold(ctx context.Context, service string, h HoldField, ttl time.Duration) error {
	if !h.valid() || ttl <= 0 {
		return fmt.Errorf("%w: renew hold %+v for %v", ErrInvalid, h, ttl)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("renew hold: %w", err)
	}
	return r.mirrorRenew(ctx, h.Key, h.Digest, ttl)(r.renewHolds(ctx, service, []HoldField{h}, ttl)[0])
}

// renewHoldsScript renews holds: KEYS are the record, its stamps and
// the held keys; ARGV the renewer's time (Unix ms), the lease (ms), then
// a digest (AnyDigest: any value, while the key exists) per held key. It
// returns one code per held key. Where the field is absent (never
// written here, or ended) or of another value (the key taken again
// since), -1. Where the key no longer holds the value, or its copy is not
// the one the field stamped (written since by someone else), the field
// is dropped (dropHold: a copy still the hold's whose value changed in
// place is the client's data now) and -1. Where the field's deadline has
// passed, -1: the key expires by itself. Else the key's lease becomes
// the lease, or what is left to the field's deadline, the copy's new
// expiry is stamped, and 1. The field decides the deadline, not the
// renewer: a proxy that changed it (PERSIST, EXPIRE of a peer's hold)
// wrote it there.
var renewHoldsScript = script.New(stampLua + holdsValueLua + dropHoldLua + `
local out = {}
for i = 3, #KEYS do
	local k, digest = KEYS[i], ARGV[i]
	local f = redis.call("HGET", KEYS[1], k)
	local code = -1
	if f and string.match(f, "(%S+)$") == digest then
		local at = redis.call("HGET", KEYS[2], k)
		local lease, deadline = tonumber(ARGV[2]), tonumber(string.match(f, "(%S+) %S+$")) or 0
		if deadline > 0 then lease = math.min(lease, deadline - tonumber(ARGV[1])) end
		if at and at ~= stamp(k) or not holdsValue(k, digest) then
			dropHold(k, f, at)
		elseif lease >= 1 then
			code = 1
			redis.call("PEXPIRE", k, string.format("%.0f", lease))
			local s = stamp(k) if s then redis.call("HSET", KEYS[2], k, s) end
		end
	end
	out[#out + 1] = code
end
return out`)

// RenewHolds is RenewHold of many holds in one call per node (a page of
// what is due), each decided on its own: its error, nil when renewed on
// a quorum. Holds renewed during a move (migrate_from) go one by one
// (RenewHold), the old instance's yes needed for each.
func (r *Redlock) RenewHolds(ctx context.Context, service string, hs []HoldField, ttl time.Duration) []error {
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
// RenewHold says: nil renewed on a quorum; ErrNotHeld when a quorum said
// so (ended, or its deadline passed: it expires by itself); else ErrNoQuorum
// (renewed on some, gone on some, no answer from others: tried again
// while it lasts).
func (r *Redlock) renewHolds(ctx context.Context, service string, hs []HoldField, ttl time.Duration) []error {
	errs := make([]error, len(hs))
	keys := recordKeys(service)
	args := []any{r.now().UnixMilli(), millis(ttl)}
	for i, h := range hs {
		if !h.valid() || ttl <= 0 {
			for j := range errs {
				errs[j] = fmt.Errorf("%w: renew hold %+v for %v", ErrInvalid, hs[i], ttl)
			}
			return errs
		}
		keys = append(keys, h.Key)
		args = append(args, h.Digest)
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

// scanHoldsScript reads one page of hash KEYS[1] (HSCAN from cursor
// ARGV[1]) and returns the next cursor, then for each field whose key
// holds the value of its digest, in the copy stamped in KEYS[2] (when
// stamped), the key, the field and the key's PTTL; the other fields
// (released, overwritten, expired, written again by someone else,
// changed in place) it drops (dropHold).
var scanHoldsScript = script.New(stampLua + holdsValueLua + dropHoldLua + `
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
// its value: Lease is how long a quorum of the key's copies lives at
// least.
type ScannedHold struct {
	HoldField
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
			out[j] = ScannedHold{HoldField: h, Lease: pttl(ms)} // the later read
			continue
		}
		at[k] = len(out)
		out = append(out, ScannedHold{HoldField: h, Lease: pttl(ms)})
	}
	return out, nil
}
