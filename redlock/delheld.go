package redlock

import (
	"context"
	"fmt"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// DEL of a lock this process granted, in one round (docs/safety.md, "DEL
// of a lock granted here").

// delHeldScript deletes KEYS[1] iff it holds the string ARGV[1] and its
// companion KEYS[2] does not version that value: the key's last change
// was a lock command's (an acquire), not a plain write of the same value,
// whose version a delete must outrank. When it deletes it publishes a
// release notice on ARGV[2] .. key with the tag ARGV[3] (none when ARGV[2]
// is empty), and deletes the key's lock marker KEYS[3] (marker.go). It
// returns {deleted, existed, counter, writer}: 1 or 0, whether the key
// existed before, and the companion's version (0, "": none).
var delHeldScript = script.New(`
local v = redis.pcall("GET", KEYS[1])
local c = redis.call("GET", KEYS[2])
local n, id, d = 0, "", nil
if c then
	local sn, sid, sd = string.match(c, "^(%d+) (%S+) (%S+)$")
	if sn then n, id, d = tonumber(sn), sid, sd end
end
local exists = redis.call("EXISTS", KEYS[1])
if type(v) ~= "string" or v ~= ARGV[1] or d == redis.sha1hex(v) then
	return {0, exists, n, id}
end
redis.call("DEL", KEYS[1], KEYS[3])
if ARGV[2] ~= "" then
	redis.call("PUBLISH", ARGV[2] .. KEYS[1], ARGV[3])
end
return {1, 1, n, id}`)

// heldDel is one node's reply to delHeldScript.
type heldDel struct {
	deleted, existed bool
	ver              version
}

func asHeldDel(v any) (heldDel, error) {
	a, ok := v.([]any)
	if ok && len(a) == 4 {
		del, ok1 := a[0].(int64)
		ex, ok2 := a[1].(int64)
		n, ok3 := a[2].(int64)
		id, ok4 := a[3].(string)
		if ok1 && ok2 && ok3 && ok4 {
			return heldDel{deleted: del == 1, existed: ex == 1, ver: version{n: n, id: id}}, nil
		}
	}
	return heldDel{}, fmt.Errorf("unexpected reply %v, want a held delete's", v)
}

// heldDelTally decides at a quorum of deletes, or when that is no longer
// possible and a quorum answered or too many failed; it keeps the newest
// version the nodes reported and how many held the key.
type heldDelTally struct {
	tally
	existed int
	newest  version
}

func (t *heldDelTally) add(d heldDel) {
	t.tally.add(d.deleted)
	if d.existed {
		t.existed++
	}
	if t.newest.less(d.ver) {
		t.newest = d.ver
	}
}

// lowWriter is the writer of a delete that DeleteHeld falls back to: it
// sorts below every writerID, so that of two writes with one counter the
// other one wins (see DeleteHeld).
const lowWriter = "0"

// DeleteHeld is DEL of key known to hold value, a lock granted through
// this process: a compare-and-delete on every node (delHeldScript), which
// answers at a quorum of deletes, as Release does. released reports that
// it did: the lock's release. Where fewer than a quorum deleted (the key
// changed since: data now, another holder's, or written plainly with that
// value), it deletes the key everywhere with a versioned delete (a
// tombstone, as Delete writes) whose version is one above the newest the
// compare-and-delete's round reported, with the lowest writer: a plain
// write that read its version after that round outranks it. existed is
// DEL's count for the key. It keeps the key's gate until every node's
// call returned, so a later operation on the key from this process
// reaches each node after it.
func (r *Redlock) DeleteHeld(ctx context.Context, key, value string) (existed, released bool, err error) {
	if err := checkKeys(ctx, "delete", []string{key}); err != nil {
		return false, false, err
	}
	defer r.mirror.Write(ctx, "delete", "DEL", key)()
	notice, tag := "", ""
	if r.notices.Load() {
		notice, tag = NoticePrefix, TokenTag(value)
	}
	del := call[heldDel]{
		cmd:    backend.Command{Kind: backend.CallEval, Script: delHeldScript, Keys: []string{key, versionKey(key), markKey(key)}, Args: []any{value, notice, tag}},
		decode: asHeldDel,
	}
	pass, err := r.gate.enter(ctx, []string{key})
	if err != nil {
		return false, false, fmt.Errorf("delete: %w", err)
	}
	t := &heldDelTally{tally: *r.tally()}
	if err := quorum(r, ctx, "delete", r.nodeTimeout, del, decider[heldDel](t), pass.leave); err != nil {
		return false, false, err
	}
	switch {
	case t.won():
		return true, true, nil
	case t.answered < t.q:
		return false, false, t.noQuorum()
	}
	pass, err = r.gate.enter(ctx, []string{key}) // after the calls above returned
	if err != nil {
		return false, false, fmt.Errorf("delete: %w", err)
	}
	defer pass.leave()
	_, err = r.writeVersion(ctx, "delete", key, false, "", 0, version{n: t.newest.n + 1, id: lowWriter})
	return t.existed >= t.q, false, err
}
