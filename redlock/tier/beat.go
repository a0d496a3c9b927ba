package tier

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// beatScript is one heartbeat on one backend. KEYS[1] is the service's
// member hash, KEYS[2] the fence counter. ARGV[1] is this proxy's announce
// address ("" for a proxy that only reads), ARGV[2] its "id joined-ms",
// ARGV[3] the entry's ttl in ms, ARGV[4] its fence high-water mark.
//
// It stores "expiry-ms id joined-ms" under ARGV[1], expiry on the
// backend's own clock (TIME), deletes the entries that expired, raises the
// fence counter to ARGV[4], and returns {counter, {addr, remaining-ms,
// "id joined-ms", …}} for the entries still live.
var beatScript = script.New(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
if ARGV[1] ~= "" then
	redis.call("HSET", KEYS[1], ARGV[1], string.format("%.0f", now + ttl) .. " " .. ARGV[2])
	redis.call("PEXPIRE", KEYS[1], 10 * ttl)
end
local live = {}
local all = redis.call("HGETALL", KEYS[1])
for i = 1, #all, 2 do
	local v = all[i + 1]
	local sp = string.find(v, " ", 1, true)
	local exp = sp and tonumber(string.sub(v, 1, sp - 1))
	if exp == nil or exp <= now then
		redis.call("HDEL", KEYS[1], all[i])
	else
		live[#live + 1] = all[i]
		live[#live + 1] = exp - now
		live[#live + 1] = string.sub(v, sp + 1)
	end
end
local fence = tonumber(redis.call("GET", KEYS[2]) or "0") or 0
local mark = tonumber(ARGV[4])
if mark > fence then
	redis.call("SET", KEYS[2], ARGV[4])
	fence = mark
end
return {fence, live}`)

// leaveScript removes ARGV[1]'s entry iff it is this process's (id
// ARGV[2]): a proxy restarted on the same address keeps its own.
var leaveScript = script.New(`
local v = redis.call("HGET", KEYS[1], ARGV[1])
if v and string.find(v, " " .. ARGV[2] .. " ", 1, true) then
	return redis.call("HDEL", KEYS[1], ARGV[1])
end
return 0`)

// entry is one member entry as a backend holds it.
type entry struct {
	addr   string
	id     string
	joined int64 // ms since the epoch, the member's own clock
}

// copyOf is one backend's copy of an entry: remaining is what is left of
// its ttl on that backend.
type copyOf struct {
	entry
	remaining time.Duration
}

// round is what one backend answered to a heartbeat.
type round struct {
	counter int64
	copies  []copyOf
}

// entryValue is the "id joined-ms" part of an entry.
func entryValue(id string, joined int64) string {
	return id + " " + strconv.FormatInt(joined, 10)
}

// decodeBeat reads beatScript's reply.
func decodeBeat(v any) (round, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return round{}, fmt.Errorf("unexpected heartbeat reply %T", v)
	}
	counter, ok := a[0].(int64)
	if !ok {
		return round{}, fmt.Errorf("unexpected fence counter %T", a[0])
	}
	live, ok := a[1].([]any)
	if !ok || len(live)%3 != 0 {
		return round{}, fmt.Errorf("unexpected member list %T", a[1])
	}
	r := round{counter: counter}
	for i := 0; i < len(live); i += 3 {
		addr, ok1 := live[i].(string)
		ms, ok2 := live[i+1].(int64)
		val, ok3 := live[i+2].(string)
		id, joined, ok4 := strings.Cut(val, " ")
		j, err := strconv.ParseInt(joined, 10, 64)
		if !ok1 || !ok2 || !ok3 || !ok4 || err != nil || id == "" || addr == "" {
			continue // not an entry of ours: ignore it, it expires or is rewritten
		}
		r.copies = append(r.copies, copyOf{entry: entry{addr: addr, id: id, joined: j}, remaining: time.Duration(ms) * time.Millisecond})
	}
	return r, nil
}

// nodeResult is one backend's answer to a heartbeat, or its error.
type nodeResult struct {
	node int
	r    round
	err  error
}

// fanOut runs script on every backend at once, each call bounded by
// CallTimeout, and returns every answer once all calls returned. Each
// call runs on a goroutine of its own that it ends before fanOut returns.
func (t *Tier) fanOut(ctx context.Context, s *script.Script, args ...any) []nodeResult {
	keys := []string{t.key, redlock.FenceKey}
	if s == leaveScript {
		keys = keys[:1]
	}
	out := make(chan nodeResult, len(t.nodes))
	for i, n := range t.nodes {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, t.callTimeout)
			defer cancel()
			v, err := n.Eval(cctx, s, keys, args...)
			res := nodeResult{node: i, err: err}
			if err == nil && s == beatScript {
				res.r, res.err = decodeBeat(v)
			}
			out <- res
		}()
	}
	results := make([]nodeResult, 0, len(t.nodes))
	for range t.nodes {
		results = append(results, <-out)
	}
	return results
}
