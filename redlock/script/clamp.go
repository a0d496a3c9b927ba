package script

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The clamp of a script by vote (docs/compatibility.md, "Expiries of
// scripts by vote"): every copy on a backend carries at most the max ttl,
// whatever the script did. The script sent is the client's body run as a
// local function under xpcall (with Redis's own error handler, so that an
// error keeps the text Redis gives it), then, in the same call, an
// epilogue that reads the PTTL of every declared key and, where it is -1
// or above the max ttl, sets the lease (PEXPIRE) and reports what the
// script wanted (of the keys as declared: the body may change KEYS, not
// the copy taken before it runs). The body starts on the wrapper's first line (after a
// shebang line, kept first), so that error lines are the client's.
//
// Each backend's reply is {report, reply}: report has one integer per
// declared key, reply is the body's reply (absent: nil; an error: an
// error element with Redis's text). Per key the report is:
//
//	-1  the key had no expiry: clamped to the lease
//	>0  the key's ttl (ms) was above the max ttl: clamped to the lease
//	 0  the key's ttl is what it was before the body ran (untouched: as
//	    it was, less the time the body ran, on the backend's clock)
//	-2  the body bounded it within the max ttl, or deleted it
//	-3  data: without expiry or beyond the max ttl, but not a key the run
//	    locked (LocksByRead): left as the body left it
//
// Without LocksByRead (%[10]s true) every key is a lock's: the run-time
// check, which tells which keys a run locked (__rp_lk), is what makes -3
// possible.
//
// The epilogue also marks every string key the run locked as the proxy's
// own acquire and extend scripts do (package redlock, marker.go): its
// marker, LockMarkPrefix + key, gets the SHA1 of the value and the ttl
// the key has after the clamp, so that any proxy tells the lock from
// data; a locked key the run deleted (a release) loses its marker.

// LockMarkPrefix starts each lock's marker (package redlock, marker.go).
const LockMarkPrefix = "redlock-proxy:lock:"

// clampSource is the wrapper: %[1]s the shebang line (with its newline)
// or "", %[2]s the body, %[3]d the max ttl and %[4]d the lease (ms),
// %[5]s the body's SHA1 (Redis names a failing script by it), %[6]s and
// %[7]s a shadow's two parts (shadowSource): __rp_mk, which makes the
// redis the body calls, and the state it is made from.
//
// The body is a function of one parameter, redis, and what it may see
// is chosen by where things are declared: a local is visible only to code
// after its declaration, and the body's own name is not visible inside it
// (local x = function, not local function x). Before the body stands only
// __rp_mk, a function of its arguments (it makes a shadow of whatever
// redis it is given: nothing the body does not have); after it, the state
// (the real redis the epilogue calls, the keys noted, the holds). So
// whatever the body does, it cannot change what the epilogue bounds nor
// call itself; it sees Redis's globals and the redis it was given. A
// shadow's metatable is protected (__metatable), so the body cannot take
// Redis's own redis from it and call past the shadow. __rp_mk shares the
// body's line, so that an error redis.call raises through a shadow names
// the line Redis would (the first: the shadow is the frame that called).
//
// Before the body runs, the wrapper seeds math.random with 0 (pcall: a
// generator a script replaced does not fail the wrapper), so that every
// backend draws the same numbers: Redis 7 keeps the generator's state
// from script to script, and a backend that restarted or ran another
// script would draw others.
//
// A script that builds keys from its declared keys ('{' .. KEYS[1] ..
// '}') may write keys the epilogue cannot name in advance. For it, the
// body is given a redis whose call and pcall note every string argument
// that contains a declared key (a built key does: the analysis only lets
// a script build keys from them), before the real call; the epilogue
// then bounds each noted key it finds without expiry or above the max
// ttl, as it does the declared ones, and reports it by name after the
// declared keys' numbers: name, then what was wanted. The price: an
// error that redis.call raises in such a script names the script's first
// line, not the line of the call (the shadow is the frame that called it).
const clampSource = `%[1]s%[6]slocal __redlock_proxy_body = function(redis, %[8]s...) %[2]s
end
` + failLocals + `local __rp_r0, __rp_seen, __rp_lk = redis, {}, {}
%[7]slocal __rp_redis, __rp_env = __rp_mk(__rp_r0, __rp_seen, __rp_h, __rp_ht0, __rp_pats, __rp_lk)
local __rp_keys, __rp_before, __rp_declared = {}, {}, {}
for i, k in ipairs(KEYS) do __rp_keys[i], __rp_before[i], __rp_declared[k] = k, __rp_r0.call('PTTL', k), true end
local __rp_t0 = __rp_r0.call('TIME')
pcall(math.randomseed, 0)
local __rp_ok, __rp_r = xpcall(function() return (__redlock_proxy_body(__rp_redis%[9]s)) end, rawget(_G, '__redis__err__handler') or function(e) return e end)
local __rp_t1 = __rp_r0.call('TIME')
local __rp_ran = (__rp_t1[1] - __rp_t0[1]) * 1000 + (__rp_t1[2] - __rp_t0[2]) / 1000
local __rp_report = {}
local __rp_mark = function(k)
	local v = __rp_r0.pcall('GET', k)
	if v == false then __rp_r0.call('DEL', '` + LockMarkPrefix + `' .. k) end
	if type(v) ~= 'string' then return end
	local t = __rp_r0.call('PTTL', k)
	if t > 0 then __rp_r0.call('SET', '` + LockMarkPrefix + `' .. k, __rp_r0.sha1hex(v), 'PX', t) end
end
for i, k in ipairs(__rp_keys) do
	local t, b = __rp_r0.call('PTTL', k), __rp_before[i]
	if (t == -1 or t > %[3]d) and not (%[10]s or __rp_lk[k] or (__rp_h and __rp_h[k])) then
		__rp_report[i] = -3
	elseif t == -1 or t > %[3]d then
		__rp_r0.call('PEXPIRE', k, %[4]d)
		__rp_report[i] = t
	elseif t == b or (b >= 0 and t >= 0 and t <= b and t >= b - __rp_ran - 2) then
		__rp_report[i] = 0
	else
		__rp_report[i] = -2
	end
	if %[10]s or __rp_lk[k] then __rp_mark(k) end
end
local __rp_built = {}
for a in pairs(__rp_seen) do
	if not __rp_declared[a] then __rp_built[#__rp_built + 1] = a end
end
table.sort(__rp_built)
for _, a in ipairs(__rp_built) do
	local t = __rp_r0.call('PTTL', a)
	if (t == -1 or t > %[3]d) and (%[10]s or __rp_lk[a]) then
		__rp_r0.call('PEXPIRE', a, %[4]d)
		__rp_report[#__rp_report + 1] = a
		__rp_report[#__rp_report + 1] = t
	end
	if %[10]s or __rp_lk[a] then __rp_mark(a) end
end
` + failSource + `return {__rp_report, __rp_r}`

// shadowSource returns a shadow's parts (clampSource): mk defines
// __rp_mk(__rp_r0, __rp_seen, __rp_h, __rp_ht0,
// __rp_pats), which returns the redis the body is given and, enforced, the
// rest of its parameters (enforce.go); prep, run after the body's
// definition, sets __rp_h, __rp_ht0 and __rp_pats; params and args are
// the body's further parameters and the arguments it is called with.
// Without holds, built keys, a reply cap or the run-time check the body
// gets Redis's own redis. builds is whether s builds keys (the clamp
// notes them; the guard only checks them).
func shadowSource(s *Script, held, builds bool) (mk, prep, params, args string) {
	if !held && !builds && s.replyCap == 0 && s.enforce == nil {
		return "local __rp_mk = function(r0) return r0 end ", "local __rp_h, __rp_ht0, __rp_pats ", "", ""
	}
	mk = "local __rp_mk = function(__rp_r0, __rp_seen, __rp_h, __rp_ht0, __rp_pats, __rp_lk) local __rp_base = __rp_r0 "
	prep = "local __rp_h, __rp_ht0 "
	if held {
		mk += heldShadow + "__rp_base = __rp_hr "
		prep = heldPrep
	}
	if builds {
		mk += builtShadow
	}
	if s.replyCap > 0 {
		mk += strings.ReplaceAll(cappedShadow, "%[1]d", strconv.Itoa(s.replyCap))
	}
	if s.enforce == nil {
		return mk + "return __rp_base end ", prep + "local __rp_pats ", "", ""
	}
	mk += "local __rp_builds = " + buildsTable(s.builds) + " " + s.enforce.lua
	mk += "return __rp_base, __rp_env end "
	return mk, prep + enforcePrep, enforceParams, ", unpack(__rp_env)"
}

// buildsTable is the starts of a script's built keys as a Lua table, or
// nil when it builds none.
func buildsTable(builds []string) string {
	if builds == nil {
		return "nil"
	}
	var b strings.Builder
	b.WriteString("{")
	for _, x := range builds {
		b.WriteString(luaQuote(x) + ",")
	}
	b.WriteString("}")
	return b.String()
}

// failSource turns the body's error (__rp_r when not __rp_ok) into one
// Redis can send: it reads an error object only with rawget and type (no
// metamethod of the client's runs), and turns anything but a string err
// into a fixed text. %[5]s is the body's SHA1. It is inline code, not a
// function (a closure made on every run), and calls the functions
// failLocals takes after the body's definition, which the body cannot
// see, before it runs.
const failSource = "if not __rp_ok then local e, m, src, ln = __rp_r " +
	"if __rp_type(e) == 'table' then m, src, ln = __rp_rawget(e, 'err'), __rp_rawget(e, 'source'), __rp_rawget(e, 'line') " +
	"else m = 'ERR ' .. __rp_tostring(e) end " +
	"if __rp_type(m) ~= 'string' then m = 'ERR a script raised an error object without an err string' end " +
	"if __rp_type(src) == 'string' and __rp_type(ln) == 'number' then m = m .. ' script: %[5]s, on ' .. src .. ':' .. ln .. '.' end " +
	"__rp_r = {err = m} end\n"

// failLocals are the functions failSource calls.
const failLocals = "local __rp_type, __rp_rawget, __rp_tostring = type, rawget, tostring\n"

// cappedShadow wraps __rp_base in a redis whose call and pcall fail the
// script on a reply of more than %[1]d elements (Script.CapReplies): an
// array by its length, a RESP3 map or set (a table in its map or set
// field) counted up to one past the cap.
const cappedShadow = "local __rp_cb = __rp_base " +
	"local function __rp_cap(r) if type(r) == 'table' then local n = #r " +
	"local m = rawget(r, 'map') or rawget(r, 'set') " +
	"if type(m) == 'table' then for _ in next, m do n = n + 1 if n > %[1]d then break end end end " +
	"if n > %[1]d then error({err = 'ERR a reply of more than %[1]d elements, more than a script by vote may walk (redlock-proxy: see docs/compatibility.md)'}) end end " +
	"return r end " +
	"__rp_base = setmetatable({call = function(...) return __rp_cap(__rp_cb.call(...)) end, " +
	"pcall = function(...) return __rp_cap(__rp_cb.pcall(...)) end}, {__index = __rp_cb, __metatable = false}) "

// builtShadow wraps __rp_base in a redis that notes the keys a script
// that builds keys writes, in __rp_seen (see clampSource).
const builtShadow = "local function __rp_note(...) for i = 1, select('#', ...) do local a = select(i, ...) " +
	"if type(a) == 'string' then for _, k in ipairs(KEYS) do " +
	"if k ~= '' and string.find(a, k, 1, true) then __rp_seen[a] = true break end end end end end " +
	"local __rp_b = __rp_base " +
	"__rp_base = setmetatable({call = function(c, ...) __rp_note(...) return __rp_b.call(c, ...) end, " +
	"pcall = function(c, ...) __rp_note(...) return __rp_b.pcall(c, ...) end}, {__index = __rp_r0, __metatable = false}) "

// guardSource is the wrapper of a script by vote that cannot write (its
// analysis found no write, or its shebang declares no-writes): the body
// under xpcall, its error turned into one Redis can send. Redis 7.0
// crashes on an error object that is a table without a string err field
// (error({})): unwrapped, one such EVAL would take down every backend at
// once. %[1]s the shebang line or "", %[2]s the body, %[5]s its SHA1.
const guardSource = `%[1]s%[6]slocal __redlock_proxy_body = function(redis, %[8]s...) %[2]s
end
` + failLocals + `local __rp_r0 = redis
%[7]slocal __rp_redis, __rp_env = __rp_mk(__rp_r0, {}, __rp_h, __rp_ht0, __rp_pats, {})
pcall(math.randomseed, 0)
local __rp_ok, __rp_r = xpcall(function() return (__redlock_proxy_body(__rp_redis%[9]s)) end, rawget(_G, '__redis__err__handler') or function(e) return e end)
` + failSource + `return __rp_r`

// Guarded returns s in the wrapper of a script that cannot write (see
// guardSource): its replies are s's, an error object Redis would crash
// on answered as an error.
func (s *Script) Guarded() *Script {
	return s.wrapped(wrapKey{kind: wrapGuard}, s.guard)
}

func (s *Script) guard() *Script { return s.guardWith(false) }

// guardWith is s in guardSource, with the held shadow when held.
func (s *Script) guardWith(held bool) *Script {
	shebang, body := s.body()
	mk, prep, params, args := shadowSource(s, held, false)
	parts := strings.SplitN(guardSource, "%[2]s", 2)
	// mk goes in before the SHA1 it names is.
	r := strings.NewReplacer("%[1]s", shebang, "%[6]s", mk, "%[7]s", prep, "%[8]s", params, "%[9]s", args)
	sha := strings.NewReplacer("%[5]s", s.hash)
	src := sha.Replace(r.Replace(parts[0])) + body + sha.Replace(r.Replace(parts[1]))
	h := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(h[:]), reply: s.reply, builds: s.builds, isWrapper: true}
}

// body is s's shebang line and body as its wrappers send them: an
// enforced body printed again (enforce_body.go).
func (s *Script) body() (shebang, body string) {
	shebang, body = splitShebang(s.src)
	if s.enforce != nil {
		body = enforcedBodyOrError(body)
	}
	return shebang, body
}

// clamps caches a Script's wrapped forms (the clamps, one per max ttl and
// lease: a process has one; the guards), each made once.
type clamps struct {
	mu   sync.Mutex
	made map[wrapKey]*Script
}

// wrapKey names one wrapped form of a Script.
type wrapKey struct {
	kind          wrapKind
	maxTTL, lease time.Duration // the clamps'
}

type wrapKind uint8

const (
	wrapClamp     wrapKind = iota // Clamped
	wrapClampHeld                 // ClampedHeld (clampheld.go)
	wrapGuard                     // Guarded
	wrapGuardHeld                 // GuardedHeld
)

// wrapped returns s's form k, made by make on first use.
func (s *Script) wrapped(k wrapKey, make func() *Script) *Script {
	if s.clamps == nil {
		return make()
	}
	c := s.clamps
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.made[k]; w != nil {
		return w
	}
	w := make()
	if c.made == nil {
		c.made = map[wrapKey]*Script{}
	}
	c.made[k] = w
	return w
}

// Clamped returns s wrapped in the clamp for maxTTL and lease (see
// above): a vote (redlock.Vote) answers the body's reply, compared as
// s's, and redlock.VoteClamped reports what a quorum wanted of each key
// (SplitClamped, CombineReports).
func (s *Script) Clamped(maxTTL, lease time.Duration) *Script {
	return s.wrapped(wrapKey{wrapClamp, maxTTL, lease}, func() *Script { return s.clamp(maxTTL, lease) })
}

func (s *Script) clamp(maxTTL, lease time.Duration) *Script { return s.clampWith(false, maxTTL, lease) }

// clampWith is s in the clamp for maxTTL and lease, with the held shadow
// when held (and the built keys' shadow when s builds keys).
func (s *Script) clampWith(held bool, maxTTL, lease time.Duration) *Script {
	shebang, body := s.body()
	mk, prep, params, args := shadowSource(s, held, s.builds != nil)
	src := clampSprintf(shebang, body, mk, prep, params, args, maxTTL.Milliseconds(), max(lease.Milliseconds(), 1), s.hash,
		s.enforce == nil || !s.byRead)
	h := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(h[:]), reply: s.reply, builds: s.builds, clamped: true, isWrapper: true}
}

// clampSprintf fills clampSource without fmt's verbs reaching the body.
func clampSprintf(shebang, body, mk, prep, params, args string, maxMS, leaseMS int64, sha string, lockAll bool) string {
	r := strings.NewReplacer("%[1]s", shebang, "%[3]d", strconv.FormatInt(maxMS, 10), "%[10]s", strconv.FormatBool(lockAll),
		"%[4]d", strconv.FormatInt(leaseMS, 10), "%[6]s", mk, "%[7]s", prep, "%[8]s", params, "%[9]s", args)
	// mk and prep go in before the SHA1 (failSource names it); the body
	// goes in last, so that nothing in it is replaced.
	named := strings.NewReplacer("%[5]s", sha)
	parts := strings.SplitN(clampSource, "%[2]s", 2)
	return named.Replace(r.Replace(parts[0])) + body + named.Replace(r.Replace(parts[1]))
}

// Wanted is what a quorum of backends reported of one declared key of a
// clamped script (redlock.VoteClamped, CombineReports).
type Wanted struct {
	// Key is the key: a declared one, in order, then the keys a script
	// that builds keys was found to leave unbounded.
	Key string
	// Hold: a quorum left the key without expiry or beyond the max ttl,
	// and its copies now carry the lease: it needs holding for TTL
	// (-1, redlock.PTTLNoExpiry: without expiry), what a quorum wanted at
	// least.
	Hold bool
	TTL  time.Duration
	// Bounded: a quorum gave the key an expiry within the max ttl,
	// deleted it, or left it as data (report -3): any hold of it ends.
	Bounded bool
}

// SplitClamped splits one backend's reply to a clamped script of n keys
// into the body's reply and the report: the n declared keys' numbers,
// and the built keys it bounded with what was wanted of each (clamp
// Source). ok false when v is not such a reply (a top-level error: the
// script did not run).
func SplitClamped(v any, n int) (reply any, report []int64, built map[string]int64, ok bool) {
	a, isArray := v.([]any)
	if !isArray || len(a) < 1 || len(a) > 2 {
		return v, nil, nil, false
	}
	rep, isArray := a[0].([]any)
	if !isArray || len(rep) < n || (len(rep)-n)%2 != 0 {
		return v, nil, nil, false
	}
	report = make([]int64, n)
	for i, e := range rep[:n] {
		x, isInt := e.(int64)
		if !isInt {
			return v, nil, nil, false
		}
		report[i] = x
	}
	for i := n; i < len(rep); i += 2 {
		k, isString := rep[i].(string)
		x, isInt := rep[i+1].(int64)
		if !isString || !isInt {
			return v, nil, nil, false
		}
		if built == nil {
			built = make(map[string]int64)
		}
		built[k] = x
	}
	if len(a) == 2 {
		reply = a[1]
	}
	return reply, report, built, true
}

// CombineReports combines the reports of the backends (one []int64 each, per
// declared key, and the built keys each bounded) for a quorum q.
func CombineReports(keys []string, reports [][]int64, built []map[string]int64, q int) []Wanted {
	out := make([]Wanted, len(keys))
	for i := range out {
		var want []int64
		bounded := 0
		for _, r := range reports {
			switch x := r[i]; {
			case x == -1, x > 0:
				want = append(want, x)
			case x == -2, x == -3:
				bounded++
			}
		}
		out[i] = wantOf(want, q)
		out[i].Bounded = !out[i].Hold && bounded >= q
		out[i].Key = keys[i]
	}
	var names []string
	for _, b := range built {
		for k := range b {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	slices.Sort(names)
	for _, k := range names {
		var want []int64
		for _, b := range built {
			if x, ok := b[k]; ok && (x == -1 || x > 0) {
				want = append(want, x)
			}
		}
		if w := wantOf(want, q); w.Hold {
			w.Key = k
			out = append(out, w)
		}
	}
	return out
}

// noExpiry is Wanted.TTL of a key wanted without expiry: the value of
// redlock.PTTLNoExpiry, which this package cannot import (redlock imports
// it); a test in package redlock checks that they agree.
const noExpiry time.Duration = -1

// wantOf is a hold when a quorum wanted more than the max ttl (-1: no
// expiry, above every ttl), for the q-th largest: no quorum, no hold.
func wantOf(want []int64, q int) Wanted {
	if len(want) < q {
		return Wanted{}
	}
	rank := func(x int64) int64 {
		if x == -1 {
			return math.MaxInt64
		}
		return x
	}
	slices.SortFunc(want, func(a, b int64) int { return cmp.Compare(rank(b), rank(a)) })
	x := want[q-1]
	if x == -1 {
		return Wanted{Hold: true, TTL: noExpiry}
	}
	// Saturate: a ttl past what a Duration holds is as good as none.
	if x > int64(math.MaxInt64/time.Millisecond) {
		return Wanted{Hold: true, TTL: noExpiry}
	}
	return Wanted{Hold: true, TTL: time.Duration(x) * time.Millisecond}
}
