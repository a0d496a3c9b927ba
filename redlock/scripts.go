package redlock

import (
	"fmt"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// The scripts below are written for Redis 7 and for miniredis: RESP2
// replies only (no redis.setresp), ttls as whole milliseconds in ARGV.
// Flags in ARGV are "1" for on.

// The acquire scripts (and SetNX's, package backend's) answer 0 where they do not set the keys, and where
// they do the register version (register.go) each key's companion
// recorded then: "counter writer", one per key joined by ",", or 1 when
// no key has a companion (the usual case, an integer that costs the
// proxy no allocation to read). A quorum of grants counts only grants
// made on one version (grantTally).

// acquireScript grants the first third of KEYS, all or none, their
// companions the second third and their lock markers (marker.go) the
// last: each key must be absent, or (with ARGV[3] on) already hold the
// token ARGV[1]. Granted, each key and its marker are set to ARGV[1]
// with a ttl of ARGV[2] ms.
var acquireScript = script.New(`
local n = #KEYS / 3
local mine = ARGV[3] == "1"
for i = 1, n do
	local held = redis.call("GET", KEYS[i])
	if held and not (mine and held == ARGV[1]) then
		return 0
	end
end
local vers, any = {}, false
for i = 1, n do
	redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2])
	redis.call("SET", KEYS[2 * n + i], redis.sha1hex(ARGV[1]), "PX", ARGV[2])
	local c = redis.call("GET", KEYS[n + i])
	vers[i] = c and string.match(c, "^%d+ %S+") or ""
	any = any or vers[i] ~= ""
end
if not any then return 1 end
return table.concat(vers, ",")`)

// holdsAllScript answers 1 where every one of KEYS holds ARGV[1], else 0.
var holdsAllScript = script.New(`
for _, key in ipairs(KEYS) do
	if redis.call("GET", key) ~= ARGV[1] then
		return 0
	end
end
return 1`)

// extendScript renews the first half of KEYS or none, iff each holds
// ARGV[1]: the ttl becomes ARGV[2] ms, or (with ARGV[3] on) the remaining
// ttl plus ARGV[2], and so does the lock marker (marker.go) of each, in
// the second half. It returns the smallest ttl it set, or 0 when some
// key is not held.
var extendScript = script.New(`
local n = #KEYS / 2
for i = 1, n do
	if redis.call("GET", KEYS[i]) ~= ARGV[1] then
		return 0
	end
end
local least = 0
for i = 1, n do
	local key = KEYS[i]
	local ms = tonumber(ARGV[2])
	if ARGV[3] == "1" then
		local left = redis.call("PTTL", key)
		if left > 0 then
			ms = ms + left
		end
	end
	redis.call("PEXPIRE", key, ms)
	redis.call("SET", KEYS[n + i], redis.sha1hex(ARGV[1]), "PX", ms)
	if least == 0 or ms < least then
		least = ms
	end
end
return least`)

// Per-key results of releaseScript.
const (
	keyDeleted = 1
	keyAbsent  = 0
	keyOther   = -1
)

// releaseScript deletes each key of the first half of KEYS that holds
// ARGV[1], and then its lock marker (marker.go) in the second half, and
// reports per key: 1 deleted, 0 absent, -1 holds another value.
var releaseScript = script.New(`
local out, n = {}, #KEYS / 2
for i = 1, n do
	local key = KEYS[i]
	local held = redis.call("GET", key)
	if held == ARGV[1] then
		redis.call("DEL", key, KEYS[n + i])
		out[i] = 1
	elseif held then
		out[i] = -1
	else
		out[i] = 0
	end
end
return out`)

// getSetScript sets KEYS[1] to ARGV[1] (with a ttl of ARGV[2] ms when
// that is positive) and returns the old value: {1, value, pttl}, or {0}
// when absent. A key of another type is left as it is: {2, type, pttl}.
var getSetScript = script.New(`
local kind = redis.call("TYPE", KEYS[1]).ok
local left = redis.call("PTTL", KEYS[1])
if kind ~= "none" and kind ~= "string" then
	return {2, kind, left}
end
local old = redis.call("GET", KEYS[1])
if tonumber(ARGV[2]) > 0 then
	redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
else
	redis.call("SET", KEYS[1], ARGV[1])
end
if not old then
	return {0}
end
return {1, old, left}`)

// ExistsScript returns, per key, 1 when it exists and 0 when not.
var ExistsScript = script.New(`
local out = {}
for i, key in ipairs(KEYS) do
	out[i] = redis.call("EXISTS", key)
end
return out`)

// casScript sets KEYS[1] and its lock marker KEYS[2] (marker.go) to
// ARGV[2] with a ttl of ARGV[3] ms iff it holds ARGV[1]: 1 done, 0 not.
var casScript = script.New(`
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
redis.call("SET", KEYS[2], redis.sha1hex(ARGV[2]), "PX", ARGV[3])
return 1`)

// flag renders a script flag.
func flag(on bool) string {
	if on {
		return "1"
	}
	return "0"
}

// asBool reads the result of a compare call.
func asBool(v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, fmt.Errorf("unexpected result %T, want bool", v)
}

// intIs1 reads a script's 1 (done) or 0 (not).
func intIs1(v any) (bool, error) {
	x, err := asInt(v)
	return x == 1, err
}

// asInt reads an integer reply.
func asInt(v any) (int64, error) {
	if n, ok := v.(int64); ok {
		return n, nil
	}
	return 0, fmt.Errorf("unexpected reply %T, want integer", v)
}

// asInts reads an array of n integers.
func asInts(v any, n int) ([]int64, error) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("unexpected reply %T, want %d integers", v, n)
	}
	out := make([]int64, n)
	for i, e := range a {
		x, err := asInt(e)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// asValue reads a value reply: {0} (absent), {1, value, pttl}, as
// getSetScript returns, or {2, type, pttl} (a key of another type).
func asValue(v any) (Value, error) {
	a, ok := v.([]any)
	if ok && len(a) == 1 && a[0] == int64(0) {
		return Value{PTTL: PTTLAbsent}, nil
	}
	if ok && len(a) == 3 && (a[0] == int64(1) || a[0] == int64(2)) {
		data, ok1 := a[1].(string)
		ms, ok2 := a[2].(int64)
		switch {
		case !ok1 || !ok2:
		case a[0] == int64(2):
			return Value{Exists: true, Type: data, PTTL: resp.PTTL(ms)}, nil
		default:
			return Value{Exists: true, Data: data, PTTL: resp.PTTL(ms)}, nil
		}
	}
	return Value{}, fmt.Errorf("unexpected reply %v, want a value", v)
}
