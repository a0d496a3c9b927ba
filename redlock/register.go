package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Versioned plain writes: SET and DEL of a key (Write, Delete) and the
// reads of one (Get, Read) keep the key a linearizable register over the
// nodes, whichever proxies the writes come through.
//
// Each node keeps, beside a written key, a companion key (VersionPrefix +
// key) holding "counter writer digest": the version of the last plain
// write it accepted and the SHA1 of the value it wrote ("-" for a delete).
// A write reads the versions of a quorum of nodes, then writes value and
// version counter+1 with a script that applies it only where the stored
// version is lower, so every node keeps the newest version it saw and the
// order in which writes arrive does not matter. A read takes the newest
// version any node reports; when fewer than a quorum hold it, it writes it
// back to a quorum before it answers.
//
// Lock paths (SET NX, compare-and-set, compare-and-delete, scripts) change
// the key alone. A node where the key no longer holds what its companion
// versioned is "changed": its state is newer than its version, in an
// order no version records. Reads never write such a state back: when no
// value has a quorum and a changed node reports the highest version, the
// read fails with ErrNoQuorum rather than guess.
//
// The companion lives as long as its key plus versionGrace (a delete's
// companion, a tombstone, lives versionGrace), so that a write delayed in
// the network less than that cannot bring back an older value.

// VersionPrefix starts the companion key of every plainly written key
// (declared in package backend, whose SetNX reads the companion).
const VersionPrefix = backend.VersionPrefix

// versionGrace is how long a companion outlives its key.
const versionGrace = time.Minute

// writerID names this process among writers; with writeSeq it makes every
// version unique, so two writes never share one.
var (
	writerID = newWriterID()
	writeSeq atomic.Uint64
)

func newWriterID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func versionKey(key string) string { return VersionPrefix + key }

// version orders plain writes: by counter, then by writer.
type version struct {
	n  int64
	id string
}

func (v version) less(w version) bool { return v.n < w.n || v.n == w.n && v.id < w.id }

// nodeState is one node's reply to versionedReadScript.
type nodeState struct {
	val     Value
	ver     version
	changed bool // the key no longer holds what ver wrote
}

// versionedReadScript returns {kind, data, pttl, counter, writer, clean}
// for KEYS[1] with companion KEYS[2]: kind 0 absent, 1 a string (data),
// 2 another type (data is the type); clean 1 when the key holds what the
// companion's version wrote.
var versionedReadScript = script.New(`
local v = redis.pcall("GET", KEYS[1])
local c = redis.call("GET", KEYS[2])
local n, id, d = "0", "", "-"
if c then
	n, id, d = string.match(c, "^(%d+) (%S+) (%S+)$")
	if not n then n, id, d = "0", "", "?" end
end
local kind, data, ttl, clean = 1, "", -2, 0
if type(v) == "table" and v.err then
	kind, data, ttl = 2, redis.call("TYPE", KEYS[1])["ok"], redis.call("PTTL", KEYS[1])
elseif not v then
	kind = 0
	if d == "-" then clean = 1 end
else
	data, ttl = v, redis.call("PTTL", KEYS[1])
	if d == redis.sha1hex(v) then clean = 1 end
end
return {kind, data, ttl, tonumber(n), id, clean}`)

// versionedWriteScript writes version ARGV[1] (counter), ARGV[2] (writer)
// to KEYS[1] with companion KEYS[2] iff the stored version is lower: with
// ARGV[3] "1" the value ARGV[4] with a ttl of ARGV[5] ms (0: none), else
// a delete (a tombstone); ARGV[6] is the companion's grace in ms; a
// delete of a key that existed publishes a release notice on ARGV[7] ..
// key unless ARGV[7] is empty. It returns {1} applied, or {0, counter,
// writer} of the newer version kept.
var versionedWriteScript = script.New(`
local c = redis.call("GET", KEYS[2])
local m = tonumber(ARGV[1])
if c then
	local n, id = string.match(c, "^(%d+) (%S+) ")
	n = tonumber(n)
	if n and (n > m or n == m and id >= ARGV[2]) then
		return {0, n, id}
	end
end
local ms, grace = tonumber(ARGV[5]), tonumber(ARGV[6])
if ARGV[3] == "1" then
	local tag = ARGV[1] .. " " .. ARGV[2] .. " " .. redis.sha1hex(ARGV[4])
	if ms > 0 then
		redis.call("SET", KEYS[1], ARGV[4], "PX", ms)
		redis.call("SET", KEYS[2], tag, "PX", ms + grace)
	else
		redis.call("SET", KEYS[1], ARGV[4])
		redis.call("SET", KEYS[2], tag)
	end
else
	if redis.call("DEL", KEYS[1]) == 1 and ARGV[7] ~= "" then
		redis.call("PUBLISH", ARGV[7] .. KEYS[1], "")
	end
	redis.call("SET", KEYS[2], ARGV[1] .. " " .. ARGV[2] .. " -", "PX", grace)
end
return {1}`)

func asNodeState(v any) (nodeState, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return nodeState{}, fmt.Errorf("unexpected reply %v, want a versioned value", v)
	}
	kind, _ := a[0].(int64)
	data, ok1 := a[1].(string)
	ms, ok2 := a[2].(int64)
	n, ok3 := a[3].(int64)
	id, ok4 := a[4].(string)
	clean, ok5 := a[5].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || kind < 0 || kind > 2 {
		return nodeState{}, fmt.Errorf("unexpected reply %v, want a versioned value", v)
	}
	s := nodeState{ver: version{n: n, id: id}, changed: clean != 1}
	switch kind {
	case 0:
		s.val = Value{PTTL: PTTLAbsent}
	case 1:
		s.val = Value{Exists: true, Data: data, PTTL: resp.PTTL(ms)}
	default:
		s.val = Value{Exists: true, Type: data, PTTL: resp.PTTL(ms)}
	}
	return s, nil
}

// stateTally collects node states, grouped by value as valueTally does.
// It waits for every node, or with early set decides once a quorum of
// nodes report the same versioned state (same value, same version above
// zero, unchanged): no newer write can have been acknowledged then, since
// its quorum shares a node with this one and no node goes back to an older
// version. Version zero (never written plainly) waits for every node, as
// does a write's read phase: a backend restarted empty reports it.
type stateTally struct {
	valueTally
	states []nodeState
}

func (t *stateTally) add(s nodeState) {
	t.valueTally.add(s.val)
	t.states = append(t.states, s)
}

func (t *stateTally) done() bool {
	if t.pending() == 0 {
		return true
	}
	if !t.early {
		return false
	}
	for _, s := range t.states {
		if s.ver.n > 0 && !s.changed && len(t.same(s)) >= t.q {
			return true
		}
	}
	return false
}

// same returns the remaining ttls of the nodes in the state s is in.
func (t *stateTally) same(s nodeState) []time.Duration {
	var ttls []time.Duration
	for _, o := range t.states {
		if o.ver == s.ver && !o.changed && !s.changed && o.val.Exists == s.val.Exists && o.val.Data == s.val.Data && o.val.Type == s.val.Type {
			ttls = append(ttls, o.val.PTTL)
		}
	}
	return ttls
}

// newest is the state with the highest version, and whether a changed
// node reports that version or a higher one (then no state is known to be
// the newest).
func (t *stateTally) newest() (nodeState, bool) {
	var top nodeState
	for i, s := range t.states {
		if i == 0 || top.ver.less(s.ver) || top.ver == s.ver && s.changed {
			top = s
		}
	}
	return top, len(t.states) > 0 && !top.changed
}

func (r *Redlock) readStates(ctx context.Context, op, key string, t *stateTally) error {
	get := call[nodeState]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: versionedReadScript, Keys: []string{key, versionKey(key)}},
		decode: asNodeState,
	}
	return quorum(r, ctx, op, r.nodeTimeout, get, decider[nodeState](t), nil)
}

// readRegister is Read (early false) and Get (early true).
func (r *Redlock) readRegister(ctx context.Context, key string, early bool) (Value, error) {
	if err := checkKeys(ctx, "read", []string{key}); err != nil {
		return Value{}, err
	}
	t := &stateTally{valueTally: *r.valueTally(early)}
	if err := r.readStates(ctx, "read", key, t); err != nil {
		return Value{}, err
	}
	if t.answered < t.q {
		return Value{}, t.noQuorum()
	}
	top, ok := t.newest()
	if !ok { // a lock command changed the newest: the lock's own quorum rule
		if v, ok := t.winner(); ok {
			return v, nil
		}
		return Value{}, fmt.Errorf("%w: the backends hold different values, none on a quorum, and the newest was changed by a lock command", ErrNoQuorum)
	}
	if ttls := t.same(top); len(ttls) >= t.q {
		v := top.val
		if v.Exists {
			v.PTTL = quorumPTTL(ttls, t.q)
		}
		return v, nil
	}
	// Write the newest back, with the least ttl any node holding it has
	// left, so that a quorum holds it before it is answered.
	left := time.Duration(-1)
	for _, s := range t.states {
		if s.ver == top.ver && !s.changed && s.val.PTTL >= 0 && (left < 0 || s.val.PTTL < left) {
			left = s.val.PTTL
		}
	}
	if top.val.Exists && left >= 0 && left < time.Millisecond {
		left = time.Millisecond
	}
	if _, err := r.writeVersion(ctx, "read repair", key, top.val.Exists, top.val.Data, left, top.ver); err != nil {
		return Value{}, err
	}
	v := top.val
	if left >= 0 {
		v.PTTL = left
	}
	return v, nil
}

// writeRegister is Write (exists) and one key of Delete: under the key's
// gate, it reads the versions of every node (each within its deadline;
// a quorum must answer) and writes a higher one. It reports whether the key existed: the newest
// version held it, or a quorum of the nodes read did.
func (r *Redlock) writeRegister(ctx context.Context, op, key string, exists bool, value string, ttl time.Duration) (bool, error) {
	pass, err := r.gate.enter(ctx, []string{key})
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	defer pass.leave()
	t := &stateTally{valueTally: *r.valueTally(false)}
	if err := r.readStates(ctx, op, key, t); err != nil {
		return false, err
	}
	if t.answered < t.q {
		return false, t.noQuorum()
	}
	top, clean := t.newest()
	holders := 0
	for _, g := range t.groups {
		if g.v.Exists {
			holders += len(g.ttls)
		}
	}
	existed := clean && top.val.Exists || holders >= t.q
	ver := version{n: top.ver.n + 1, id: writerID + "." + strconv.FormatUint(writeSeq.Add(1), 10)}
	_, err = r.writeVersion(ctx, op, key, exists, value, ttl, ver)
	return existed, err
}

// versionTally counts a versioned write's replies: applied, or refused
// for a newer version (newest kept). It decides at a quorum applied, or
// when every node answered.
type versionTally struct {
	counts
	applied, refused int
	newest           *version
}

func (t *versionTally) add(v *version) {
	t.answered++
	if v == nil {
		t.applied++
		return
	}
	t.refused++
	if t.newest == nil || t.newest.less(*v) {
		t.newest = v
	}
}

func (t *versionTally) done() bool { return t.applied >= t.q || t.pending() == 0 }

func asWriteReply(v any) (*version, error) {
	a, ok := v.([]any)
	switch {
	case ok && len(a) == 1 && a[0] == int64(1):
		return nil, nil
	case ok && len(a) == 3 && a[0] == int64(0):
		n, ok1 := a[1].(int64)
		id, ok2 := a[2].(string)
		if ok1 && ok2 {
			return &version{n: n, id: id}, nil
		}
	}
	return nil, fmt.Errorf("unexpected reply %v, want a versioned write's", v)
}

// writeVersion writes value (or a delete) at ver on every node. It
// succeeds once a quorum applied it or refused it for a newer version,
// and then returns the newest such version (nil: none). A refusal is an
// acknowledgement: the newer write is concurrent with this one, whose read
// phase did not see it, and this write takes effect just before it. (It
// must not be sent again with a higher version: a read may already have
// answered its value, and a later write seen after it.)
func (r *Redlock) writeVersion(ctx context.Context, op, key string, exists bool, value string, ttl time.Duration, ver version) (*version, error) {
	var ms int64
	if exists && ttl > 0 {
		ms = backend.Millis(ttl)
	}
	notice := ""
	if !exists && r.notices.Load() {
		notice = NoticePrefix
	}
	args := []any{ver.n, ver.id, flag(exists), value, ms, backend.Millis(r.graceFor()), notice}
	put := call[*version]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: versionedWriteScript, Keys: []string{key, versionKey(key)}, Args: args},
		decode: asWriteReply,
	}
	t := &versionTally{counts: r.counts()}
	if err := quorum(r, ctx, op, r.dataTimeout(ttl), put, decider[*version](t), nil); err != nil {
		return nil, err
	}
	switch {
	case t.applied >= t.q:
		return nil, nil
	case t.answered < t.q:
		return nil, t.noQuorum()
	}
	return t.newest, nil
}

// graceFor is how long a companion outlives its key: versionGrace, or
// MaxTTL when that is longer.
func (r *Redlock) graceFor() time.Duration { return max(versionGrace, r.maxTTL) }
