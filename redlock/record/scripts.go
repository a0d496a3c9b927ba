package record

import "github.com/redlock-proxy/redlock-proxy/redlock/script"

// The scripts on the record, each run on one backend: package redlock
// sends them to every node and decides on the replies. A script writes a
// held key's field only in the call that checks or writes the key's copy.

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

// AcquireScript is SET KEYS[1] ARGV[1] NX PX ARGV[2] and, where it set
// the key, the hold's field ARGV[3] in the record KEYS[2] and the copy's
// stamp in KEYS[3], in the same call. It answers as package redlock's
// acquire scripts do: 0 held; set, the version KEYS[4] (the key's
// register companion) records, or 1 without one.
var AcquireScript = script.New(stampLua + `
if not redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 0 end
redis.call("HSET", KEYS[2], KEYS[1], ARGV[3])
local s = stamp(KEYS[1]) if s then redis.call("HSET", KEYS[3], KEYS[1], s) end
local c = redis.call("GET", KEYS[4])
return c and string.match(c, "^%d+ %S+") or 1`)

// SetScript writes field ARGV[1] of hash KEYS[1] as ARGV[2] where the
// key ARGV[1] holds the value of the field's digest (any value for "*"),
// and stamps the key copy's expiry in KEYS[2]: of two writers of one key
// that overlapped, the loser's record does not replace the winner's.
// 1 written, 0 not.
var SetScript = script.New(stampLua + holdsValueLua + `
if not holdsValue(ARGV[1], string.match(ARGV[2], "(%S+)$")) then return 0 end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
local s = stamp(ARGV[1]) if s then redis.call("HSET", KEYS[2], ARGV[1], s) end
return 1`)

// EndScript deletes field ARGV[1] of hash KEYS[1] and its stamp, if
// there is one and, with a digest ARGV[2], the key ARGV[1] holds the
// value of that digest: 1, else 0.
var EndScript = script.New(holdsValueLua + `
if not redis.call("HGET", KEYS[1], ARGV[1]) then return 0 end
if ARGV[2] ~= "" and not holdsValue(ARGV[1], ARGV[2]) then return 0 end
redis.call("HDEL", KEYS[1], ARGV[1])
redis.call("HDEL", KEYS[2], ARGV[1])
return 1`)

// RenewScript renews holds: KEYS are the record, its stamps and the
// held keys; ARGV the renewer's time (Unix ms), the lease (ms), then a
// digest (AnyDigest: any value, while the key exists) per held key. It
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
var RenewScript = script.New(stampLua + holdsValueLua + dropHoldLua + `
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

// scanScript reads one page of hash KEYS[1] (HSCAN from cursor ARGV[1])
// and returns the next cursor, then for each field whose key holds the
// value of its digest, in the copy stamped in KEYS[2] (when stamped),
// the key, the field and the key's PTTL; the other fields (released,
// overwritten, expired, written again by someone else, changed in place)
// it drops (dropHold).
var scanScript = script.New(stampLua + holdsValueLua + dropHoldLua + `
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

// DumpScript answers DUMP of KEYS[1] where it is the hold's own copy:
// its field in hash KEYS[2] is of digest ARGV[3], the key holds the value
// of sha1 ARGV[1] (any value of any type when ARGV[1] is "") and its
// expiry is the one stamped in KEYS[3] (when stamped); after giving it a
// lease of ARGV[2] ms and stamping that. Else nil.
var DumpScript = script.New(stampLua + `
local f = redis.call("HGET", KEYS[2], KEYS[1])
if not f or string.match(f, "(%S+)$") ~= ARGV[3] then return false end
local t = redis.call("TYPE", KEYS[1]).ok
if t == "none" then return false end
if ARGV[1] ~= "" then
	if t ~= "string" or redis.sha1hex(redis.call("GET", KEYS[1])) ~= ARGV[1] then return false end
end
local at = redis.call("HGET", KEYS[3], KEYS[1])
if at and at ~= stamp(KEYS[1]) then return false end
redis.call("PEXPIRE", KEYS[1], ARGV[2])
local s = stamp(KEYS[1]) if s then redis.call("HSET", KEYS[3], KEYS[1], s) end
return redis.call("DUMP", KEYS[1])`)

// RestoreScript writes the hold's copy back where KEYS[1] is absent:
// RESTORE with a lease of ARGV[1] ms from DUMP ARGV[2], its field ARGV[3]
// in hash KEYS[2] and its expiry stamped in KEYS[3]; 1. Where the key is
// the hold's own copy (as DumpScript checks, ARGV[4] the field's digest, ARGV[5]
// the digest or ""), written back by an earlier round, it gets the lease
// (2); another value or another copy is left alone (0).
var RestoreScript = script.New(stampLua + `
local t = redis.call("TYPE", KEYS[1]).ok
if t == "none" then
	redis.call("RESTORE", KEYS[1], ARGV[1], ARGV[2])
	redis.call("HSET", KEYS[2], KEYS[1], ARGV[3])
	local s = stamp(KEYS[1]) if s then redis.call("HSET", KEYS[3], KEYS[1], s) end
	return 1
end
local f = redis.call("HGET", KEYS[2], KEYS[1])
if not f or string.match(f, "(%S+)$") ~= ARGV[4] then return 0 end
if ARGV[5] ~= "" and (t ~= "string" or redis.sha1hex(redis.call("GET", KEYS[1])) ~= ARGV[5]) then return 0 end
local at = redis.call("HGET", KEYS[3], KEYS[1])
if at and at ~= stamp(KEYS[1]) then return 0 end
redis.call("PEXPIRE", KEYS[1], ARGV[1])
local s = stamp(KEYS[1]) if s then redis.call("HSET", KEYS[3], KEYS[1], s) end
return 2`)

// RenewCopyScript keeps a held key's copy on migrate_from's old
// instance: where KEYS[1] holds the value of digest ARGV[1] (AnyDigest:
// any value, while it exists), its ttl is raised to ARGV[2] ms, and 1;
// else 0. It never lowers a ttl (a copy without expiry, or with more
// left, stays as it is), so a renewal that meets another client's copy
// there (one of the same value, or of any value for a hold of any)
// cannot cut that client's lock short. It needs nothing newer than Redis
// 2.6: the old instance is whatever the clients used. It touches no
// record: the old instance has none.
var RenewCopyScript = script.New(holdsValueLua + `
if not holdsValue(KEYS[1], ARGV[1]) then return 0 end
local left = redis.call("PTTL", KEYS[1])
if left >= 0 and left < tonumber(ARGV[2]) then
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 1`)
