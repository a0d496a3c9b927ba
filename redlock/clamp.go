package redlock

import (
	"crypto/sha1"
	"encoding/hex"
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

// clampSource is the wrapper: %[1]s the shebang line (with its newline)
// or "", %[2]s the body, %[3]d the max ttl and %[4]d the lease (ms),
// %[5]s the body's SHA1 (Redis names a failing script by it).
const clampSource = `%[1]slocal function __redlock_proxy_body(...) %[2]s
end
local __rp_keys, __rp_before = {}, {}
for i, k in ipairs(KEYS) do __rp_keys[i], __rp_before[i] = k, redis.call('PTTL', k) end
local __rp_t0 = redis.call('TIME')
local __rp_ok, __rp_r = xpcall(__redlock_proxy_body, rawget(_G, '__redis__err__handler') or function(e) return e end)
local __rp_t1 = redis.call('TIME')
local __rp_ran = (__rp_t1[1] - __rp_t0[1]) * 1000 + (__rp_t1[2] - __rp_t0[2]) / 1000
local __rp_report = {}
for i, k in ipairs(__rp_keys) do
	local t, b = redis.call('PTTL', k), __rp_before[i]
	if t == -1 or t > %[3]d then
		redis.call('PEXPIRE', k, %[4]d)
		__rp_report[i] = t
	elseif t == b or (b >= 0 and t >= 0 and t <= b and t >= b - __rp_ran - 2) then
		__rp_report[i] = 0
	else
		__rp_report[i] = -2
	end
end
if not __rp_ok then
	local e = __rp_r
	if type(e) ~= 'table' then e = {err = tostring(e)} end
	local m = e.err
	if type(m) ~= 'string' then m = 'ERR ' .. tostring(m) end
	if e.source and e.line then m = m .. ' script: %[5]s, on ' .. e.source .. ':' .. e.line .. '.' end
	__rp_r = {err = m}
end
return {__rp_report, __rp_r}`

// clamps caches a Script's clamped forms (one per max ttl and lease: a
// process has one).
type clamps struct {
	mu   sync.Mutex
	made map[[2]time.Duration]*Script
}

// Clamped returns s wrapped in the clamp for maxTTL and lease (see
// above): Vote answers the body's reply, compared as s's, and
// VoteClamped reports what a quorum wanted of each key.
func (s *Script) Clamped(maxTTL, lease time.Duration) *Script {
	if s.clamps == nil {
		return s.clamp(maxTTL, lease)
	}
	c := s.clamps
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]time.Duration{maxTTL, lease}
	if w := c.made[k]; w != nil {
		return w
	}
	w := s.clamp(maxTTL, lease)
	if c.made == nil {
		c.made = make(map[[2]time.Duration]*Script)
	}
	c.made[k] = w
	return w
}

func (s *Script) clamp(maxTTL, lease time.Duration) *Script {
	shebang, body := "", s.src
	if strings.HasPrefix(body, "#!") {
		i := strings.IndexByte(body, '\n')
		if i < 0 {
			shebang, body = body+"\n", ""
		} else {
			shebang, body = body[:i+1], body[i+1:]
		}
	}
	src := clampSprintf(shebang, body, maxTTL.Milliseconds(), max(lease.Milliseconds(), 1), s.hash)
	h := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(h[:]), reply: s.reply, builds: s.builds, clamped: true}
}

// clampSprintf fills clampSource without fmt's verbs reaching the body.
func clampSprintf(shebang, body string, maxMS, leaseMS int64, sha string) string {
	r := strings.NewReplacer("%[1]s", shebang, "%[2]s", body, "%[3]d", strconv.FormatInt(maxMS, 10),
		"%[4]d", strconv.FormatInt(leaseMS, 10), "%[5]s", sha)
	// The body goes in last, so that nothing in it is replaced.
	parts := strings.SplitN(clampSource, "%[2]s", 2)
	return r.Replace(parts[0]) + body + r.Replace(parts[1])
}

// Wanted is what a quorum of backends reported of one declared key of a
// clamped script (VoteClamped).
type Wanted struct {
	// Hold: a quorum left the key without expiry or beyond the max ttl,
	// and its copies now carry the lease: it needs holding for TTL
	// (PTTLNoExpiry: without expiry), what a quorum wanted at least.
	Hold bool
	TTL  time.Duration
	// Bounded: a quorum gave the key an expiry within the max ttl, or
	// deleted it: any hold of it ends.
	Bounded bool
}

// splitClamped splits one backend's reply to a clamped script of n keys
// into the body's reply and the report; ok false when v is not such a
// reply (a top-level error: the script did not run).
func splitClamped(v any, n int) (reply any, report []int64, ok bool) {
	a, isArray := v.([]any)
	if !isArray || len(a) < 1 || len(a) > 2 {
		return v, nil, false
	}
	rep, isArray := a[0].([]any)
	if !isArray || len(rep) != n {
		return v, nil, false
	}
	report = make([]int64, n)
	for i, e := range rep {
		x, isInt := e.(int64)
		if !isInt {
			return v, nil, false
		}
		report[i] = x
	}
	if len(a) == 2 {
		reply = a[1]
	}
	return reply, report, true
}

// wanted combines the reports of the backends (one []int64 each, per
// key) for a quorum q.
func wanted(reports [][]int64, n, q int) []Wanted {
	out := make([]Wanted, n)
	for i := range out {
		var want []int64 // -1 ranks above every ttl
		bounded := 0
		for _, r := range reports {
			switch x := r[i]; {
			case x == -1:
				want = append(want, 1<<62)
			case x > 0:
				want = append(want, x)
			case x == -2:
				bounded++
			}
		}
		switch {
		case len(want) >= q:
			slices.Sort(want)
			slices.Reverse(want)
			ttl := PTTLNoExpiry
			if x := want[q-1]; x != 1<<62 {
				ttl = time.Duration(x) * time.Millisecond
			}
			out[i] = Wanted{Hold: true, TTL: ttl}
		case bounded >= q:
			out[i] = Wanted{Bounded: true}
		}
	}
	return out
}
