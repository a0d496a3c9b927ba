package script

import (
	"strconv"
	"time"
)

// The held shadow of a clamped script (docs/compatibility.md, "Expiries
// of scripts by vote"): a declared key the proxy holds beyond max_ttl has
// copies that carry the lease, not the expiry its client gave. So that
// the body sees what one Redis would show, the proxy appends to ARGV
// three strings per declared key (HeldArgs) and runs the script wrapped
// with heldShadow: it takes them off ARGV before the body runs, and the
// body's redis.call and redis.pcall answer TTL, PTTL, EXPIRETIME and
// PEXPIRETIME of a held key from the hold, and decide EXPIRE, PEXPIRE,
// EXPIREAT and PEXPIREAT's NX, XX, GT and LT and PERSIST against it (the
// expiry itself, once decided, is the real command without its options:
// the epilogue then reports it, and the proxy holds or ends the hold as
// for any clamped script). A key is read from its hold while its copy's
// PTTL is still what it was when the script began, less the time it ran
// (it held the hold's value then; a write that keeps the ttl, SET
// KEEPTTL, INCR, keeps the hold as the epilogue keeps it): once the body
// gave it an expiry (or a write gave it another), the real copy answers.
// A script that cannot write (Guarded) gets the same shadow
// (GuardedHeld). Each answer is the same on every backend (the ttl sent,
// not each backend's clock). Scripts with no held key run without it.

// DeclaredHold is a declared key's hold as the script's shadow reads it.
type DeclaredHold struct {
	Held     bool
	Deadline int64  // Unix ms (this proxy's clock); -1: without expiry
	TTL      int64  // ms left to Deadline when sent; -1: without expiry
	Digest   string // of the value held, or record.AnyDigest ("*")
}

// HeldArgs is what a script clamped with ClampedHeld expects after its
// client's ARGV: three strings per declared key, in order.
func HeldArgs(held []DeclaredHold) []string {
	out := make([]string, 0, 3*len(held))
	for _, h := range held {
		if !h.Held {
			out = append(out, "-2", "0", "-")
			continue
		}
		out = append(out, strconv.FormatInt(h.Deadline, 10), strconv.FormatInt(h.TTL, 10), h.Digest)
	}
	return out
}

// heldPrep reads the holds off ARGV (three strings per declared key,
// which it then takes off ARGV) into __rp_h, after the body's definition
// (clampSource): a declared key is held while its copy holds the value
// digested (its PTTL then noted).
const heldPrep = "local __rp_h, __rp_ht0 = {}, __rp_r0.call('TIME') " +
	"do local n = #KEYS local b = #ARGV - 3 * n " +
	"for i = 1, n do local d = tonumber(ARGV[b + 3 * i - 2]) " +
	"if d and d ~= -2 then local k, g = KEYS[i], ARGV[b + 3 * i] local ok = g == '*' " +
	"if not ok then local v = __rp_r0.pcall('GET', k) ok = type(v) == 'string' and __rp_r0.sha1hex(v) == g end " +
	"if ok then __rp_h[k] = {d = d, r = tonumber(ARGV[b + 3 * i - 1]), p = __rp_r0.call('PTTL', k)} end end end " +
	"for i = 1, 3 * n do ARGV[#ARGV] = nil end end "

// heldShadow is the body of __rp_mk for a script run with holds (see
// above and shadowSource): it answers from __rp_h and defines __rp_hr.
const heldShadow = "local function __rp_held(k) local h = __rp_h[k] if not h or h.touched then return nil end " +
	"local t, now = __rp_r0.call('PTTL', k), __rp_r0.call('TIME') " +
	"local ran = (now[1] - __rp_ht0[1]) * 1000 + (now[2] - __rp_ht0[2]) / 1000 " +
	"if t < 0 or t > h.p or t < h.p - ran - 2 then return nil end return h end " +
	"local function __rp_exp(f, c, k, n, ...) local opts = {...} " +
	"if #opts == 0 then __rp_h[k].touched = true return nil end " +
	"local h = __rp_held(k) if not h then return nil end " +
	"local nx, xx, gt, lt = false, false, false, false " +
	"for _, o in ipairs(opts) do if type(o) ~= 'string' then return nil end o = string.upper(o) " +
	"if o == 'NX' then nx = true elseif o == 'XX' then xx = true elseif o == 'GT' then gt = true elseif o == 'LT' then lt = true else return nil end end " +
	"if (nx and (xx or gt or lt)) or (gt and lt) then return nil end " +
	"local x = tonumber(n) if not x or x ~= math.floor(x) then return nil end " +
	"local new, cur = x, h.r if c == 'expire' or c == 'expireat' then new = x * 1000 end " +
	"if c == 'expireat' or c == 'pexpireat' then cur = h.d end " +
	"local has = h.d ~= -1 " +
	"if (nx and has) or (xx and not has) or (gt and (not has or new <= cur)) or (lt and has and new >= cur) then return 0 end " +
	"h.touched = true return f(c, k, n) end " +
	"local function __rp_hc(f, c, ...) local k = ... " +
	"if type(c) == 'string' and type(k) == 'string' and __rp_h[k] then local l = string.lower(c) local extra = select('#', ...) - 1 " +
	"if (l == 'ttl' or l == 'pttl' or l == 'expiretime' or l == 'pexpiretime') and extra == 0 then local h = __rp_held(k) " +
	"if h then if h.d == -1 then return -1 elseif l == 'pttl' then return h.r elseif l == 'ttl' then return math.floor((h.r + 500) / 1000) " +
	"elseif l == 'pexpiretime' then return h.d else return math.floor((h.d + 500) / 1000) end end " +
	"elseif l == 'persist' and extra == 0 then local h = __rp_held(k) if h then if h.d == -1 then return 0 end h.touched = true end " +
	"elseif (l == 'expire' or l == 'pexpire' or l == 'expireat' or l == 'pexpireat') and extra >= 1 then " +
	"local r = __rp_exp(f, l, ...) if r ~= nil then return r end end end " +
	"return f(c, ...) end " +
	"local __rp_hr = setmetatable({call = function(...) return __rp_hc(__rp_r0.call, ...) end, " +
	"pcall = function(...) return __rp_hc(__rp_r0.pcall, ...) end}, {__index = __rp_r0, __metatable = false}) "

// ClampedHeld is Clamped with the held shadow (see above): call it with
// HeldArgs appended to the client's ARGV.
func (s *Script) ClampedHeld(maxTTL, lease time.Duration) *Script {
	return s.wrapped(wrapKey{wrapClampHeld, maxTTL, lease}, func() *Script { return s.clampHeld(maxTTL, lease) })
}

func (s *Script) clampHeld(maxTTL, lease time.Duration) *Script {
	return s.clampWith(true, maxTTL, lease)
}

// GuardedHeld is Guarded with the held shadow: call it with HeldArgs
// appended to the client's ARGV.
func (s *Script) GuardedHeld() *Script {
	return s.wrapped(wrapKey{kind: wrapGuardHeld}, s.guardHeld)
}

func (s *Script) guardHeld() *Script { return s.guardWith(true) }
