package redlock

import (
	"context"
	"slices"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Lock markers: a key's kind, known where each write lands, whichever
// proxy sends it (docs/safety.md, "Locks and data"). Every acquire of a
// lock with a ttl (acquireOneScript, acquireScript, the fenced acquire)
// writes, in the same call and where it sets the key, the key's marker
// (LockMarkPrefix + key) with the SHA1 of the token (never a client's
// data: a read-modify-write of a large value marks it in 40 bytes) and
// the lock's ttl;
// every extend by token (expireScript, extendScript) and every PEXPIRE of
// the key (markedExpireScript) gives the marker the key's new ttl, and a
// compare-and-set (casScript) the key's new value too. A key is a lock
// (Marked) where a quorum of backends hold it with the value whose SHA1
// its marker holds: a release, an expiry or a write over the key leaves a marker
// that no longer matches, and it expires with the ttl it was given; a
// release by a script deletes it with the key (delScript, the release and
// notifying scripts, delHeldScript). A script by vote marks the keys its
// run locked in its epilogue (script.LockMarkPrefix). Holds need none:
// the record names them.

// LockMarkPrefix starts the marker of every key a lock with a ttl set;
// the script package writes it too (a script by vote's locked keys).
const LockMarkPrefix = script.LockMarkPrefix

func markKey(key string) string { return LockMarkPrefix + key }

// withMarkers is keys followed by their markers, a new slice.
func withMarkers(keys []string) []string {
	out := append(slices.Clone(keys), make([]string, len(keys))...)
	for i, k := range keys {
		out[len(keys)+i] = markKey(k)
	}
	return out
}

// markedScript answers 1 where KEYS[1] is a string whose SHA1 its marker
// KEYS[2] holds, else 0.
var markedScript = script.New(`
local v = redis.pcall("GET", KEYS[1])
if type(v) == "string" and redis.call("GET", KEYS[2]) == redis.sha1hex(v) then return 1 end
return 0`)

// markedExpireScript is PEXPIRE KEYS[1] ARGV[1], and of its marker KEYS[2]
// where the marker holds the key's value's SHA1: 1 done, 0 the key is
// absent.
var markedExpireScript = script.New(`
local v = redis.pcall("GET", KEYS[1])
local done = redis.call("PEXPIRE", KEYS[1], ARGV[1])
if done == 1 and type(v) == "string" and redis.call("GET", KEYS[2]) == redis.sha1hex(v) then
	redis.call("PEXPIRE", KEYS[2], ARGV[1])
end
return done`)

// Marked reports whether key is a lock by its markers: a quorum of nodes
// hold it with the value whose SHA1 its marker holds. It fails with ErrNoQuorum
// when fewer than a quorum answered.
func (r *Redlock) Marked(ctx context.Context, key string) (bool, error) {
	if err := checkKeys(ctx, "read", []string{key}); err != nil {
		return false, err
	}
	c := call[bool]{cmd: backend.Command{Kind: backend.CallEval, Script: markedScript, Keys: []string{key, markKey(key)}}, decode: intIs1}
	return r.quorumWon(ctx, "read", r.nodeTimeout, c)
}
