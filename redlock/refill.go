package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Refill (docs/safety.md, "Locks and data"): a backend that came back
// empty (its run_id changed, or it was younger than the quarantine at
// start) lost its data, which no lease brings back. While it sits out
// its quarantine, the health loop copies back, a page at a time, every
// key that can outlive the quarantine (no expiry, or more than max_ttl
// left: data; a lock's copy never carries more than max_ttl, so none is
// copied) and that the other voting backends agree on: the value a
// quorum of all the backends holds alike (its content compared: a set's
// members, a hash's fields, a list's elements),
// or for a versioned string (register.go) the newest version any of them
// holds. A key that a quorum reports gone is deleted from it. It pages
// through one voting backend's keys, then through its own (to drop what
// was deleted since it was copied), and again, until its quarantine is
// over and one whole pass of both is done: only then does it vote, so
// that backends lost one at a time, each refilled before the next, never
// add up to lost data. With fewer than a quorum of other backends voting
// there is nothing to refill from: once its quarantine is over it votes.

// Refill bounds.
const (
	refillPage = 100 // keys per SCAN page and per script call
	// refillPause is the pause between pages, so that a refill never
	// takes a backend from the lock calls.
	refillPause = 5 * time.Millisecond
	// refillTries is how often a page whose keys could not be copied is
	// tried before it is passed over (its keys counted unsolved).
	refillTries = 5
	// refillLonger is how long past its quarantine a backend waits for
	// its refill at most: then it votes all the same, and says so.
	refillLonger = 10 * time.Minute
)

// RefillProgress is how far the refill of a backend that came back empty
// has got (NodeStatus.Refill).
type RefillProgress struct {
	Passes   int   // whole passes done (a source's keys, then its own)
	Scanned  int64 // keys looked at
	Copied   int64 // keys copied to it
	Deleted  int64 // keys deleted from it (gone on a quorum)
	Unsolved int64 // keys the others do not agree on: left as they are
}

// refill is one backend's refill in progress (nodeHealth.refill).
type refill struct {
	RefillProgress
	own    bool   // this pass scans the backend itself, else source
	source int    // the voting backend scanned (-1: none chosen)
	cursor string // SCAN cursor of this pass ("0": start)
	done   bool   // a whole pass done: it may vote once its quarantine is over
	tries  int    // failed tries of the page at cursor
}

// refillReadScript reads KEYS for a refill: per key {pttl, dump, counter,
// writer, digest, clean}: pttl -2 gone, -3 a ttl of at most ARGV[1] ms (a lock's
// copy, or data that expires within the quarantine: not copied), else
// the key's (-1: none) with its DUMP and a digest of its content (a set's
// members and a hash's fields sorted: two backends' DUMPs of one set
// differ with the order of their hash tables); and the version of a string written by
// the register (register.go: of the companion itself for a companion
// key; a tombstone's for a deleted one), 0 and "" without one; clean 1
// when the key holds what that version wrote (0: a lock command changed
// it since, or the key is the tombstone's and exists).
var refillReadScript = script.New(`
local function digest(k, t)
	local parts
	if t == "set" then
		parts = redis.call("SMEMBERS", k)
		table.sort(parts)
	elseif t == "hash" then
		local kv = redis.call("HGETALL", k)
		parts = {}
		for i = 1, #kv, 2 do parts[#parts + 1] = #kv[i] .. ":" .. kv[i] .. kv[i + 1] end
		table.sort(parts)
	elseif t == "zset" then
		parts = redis.call("ZRANGE", k, 0, -1, "WITHSCORES")
	elseif t == "list" then
		parts = redis.call("LRANGE", k, 0, -1)
	elseif t == "string" then
		return redis.sha1hex(redis.call("GET", k))
	else
		return redis.sha1hex(redis.call("DUMP", k))
	end
	for i, p in ipairs(parts) do parts[i] = #p .. ":" .. p end
	return redis.sha1hex(t .. table.concat(parts))
end
local out = {}
for i, k in ipairs(KEYS) do
	local c = k
	if string.sub(k, 1, #ARGV[2]) ~= ARGV[2] then c = ARGV[2] .. k end
	local v = redis.pcall("GET", c)
	local n, id, vd = 0, "", ""
	if type(v) == "string" then
		local a, b, e = string.match(v, "^(%d+) (%S+) (%S+)$")
		if a then n, id, vd = tonumber(a), b, e end
	end
	local t, d, h = redis.call("PTTL", k), "", ""
	if t >= 0 and t <= tonumber(ARGV[1]) then
		t = -3
	elseif t ~= -2 then
		d, h = redis.call("DUMP", k), digest(k, redis.call("TYPE", k)["ok"])
	end
	local clean = 1
	if c ~= k and n > 0 then
		-- the key holds what its version wrote: that value, or gone for
		-- a delete's tombstone
		local kv = redis.pcall("GET", k)
		if t == -2 then
			if vd ~= "-" then clean = 0 end
		elseif type(kv) ~= "string" or redis.sha1hex(kv) ~= vd then
			clean = 0
		end
	end
	out[i] = {t, d, n, id, h, clean}
end
return out`)

// refillWriteScript applies a page on the backend refilled: ARGV[1] is
// the quarantine (ms), then quadruples of op ("r": RESTORE of the dump
// with the ttl, "d": delete), ttl in ms (0: none), dump, and what the key
// held there when the page was read (the SHA1 of its DUMP, "-" for
// none), one per KEYS. A key that changed since it was read is left
// alone: another proxy of the tier may already let this backend vote and
// write to it (a lock granted, data written), and a decision made before
// that write must not undo it. A key with a ttl of at most the quarantine
// (a lock's copy) is never touched. It returns how many it restored and
// how many it deleted.
var refillWriteScript = script.New(`
local restored, deleted = 0, 0
for i, k in ipairs(KEYS) do
	local j = 4 * i - 2
	local d, t = redis.call("DUMP", k), redis.call("PTTL", k)
	local was = "-"
	if d then was = redis.sha1hex(d) end
	if was == ARGV[j + 3] and (t < 0 or t > tonumber(ARGV[1])) then
		if ARGV[j] == "r" then
			redis.call("RESTORE", k, ARGV[j + 1], ARGV[j + 2], "REPLACE")
			restored = restored + 1
		else
			redis.call("DEL", k)
			deleted = deleted + 1
		end
	end
end
return {restored, deleted}`)

// copyState is one source's answer about one key in a refill.
type copyState struct {
	ttl     int64 // -2 gone, -3 not copied, -1 no expiry, else ms
	dump    string
	digest  string // of the content (refillReadScript)
	version version
	clean   bool // the key holds what version wrote
}

// startRefill marks node h as come back empty, while RunHealth runs
// (which refills it): it votes only once a whole pass of its refill is
// done and its quarantine is over. h.mu is held.
func (r *Redlock) startRefill(h *nodeHealth) {
	if r.loops.Load() == 0 {
		return
	}
	h.refill = &refill{source: -1, cursor: "0"}
	h.stop()
}

// runRefills refills, a page at a time, every backend that came back
// empty, until ctx ends. RunHealth runs it and waits for it.
func (r *Redlock) runRefills(ctx context.Context) {
	for ctx.Err() == nil {
		worked := false
		for i, h := range r.health {
			h.mu.Lock()
			f := h.refill
			h.mu.Unlock()
			if f != nil {
				r.refillPage(ctx, i, f)
				worked = true
			}
		}
		wait := refillPause
		if !worked {
			wait = r.healthInterval
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// refillPage does one page of node t's refill f (only this goroutine
// changes f, under t's lock).
func (r *Redlock) refillPage(ctx context.Context, t int, f *refill) {
	h := r.health[t]
	h.mu.Lock()
	now := r.now()
	over := !now.Before(h.until) && (f.done || now.After(h.until.Add(refillLonger)))
	switch {
	case over && f.done:
		r.endRefill(h, "refilled")
	case over:
		r.log.Warn("backend refill not done long after its quarantine: it votes all the same", "node", h.addr)
		r.endRefill(h, "ran too long")
	}
	h.mu.Unlock()
	if over {
		return
	}
	var sources []int
	for i := range r.nodes {
		if i != t && r.votesNow(i) {
			sources = append(sources, i)
		}
	}
	if len(sources) < r.quorum {
		// Nothing to refill from: once the quarantine is over, it votes.
		h.mu.Lock()
		if !r.now().Before(h.until) {
			r.endRefill(h, "fewer than a quorum of other backends vote")
		}
		h.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	scan := t
	if !f.own {
		if f.source < 0 || !r.votesNow(f.source) {
			f.source, f.cursor = r.fullest(ctx, sources), "0" // a pass starts again
		}
		scan = f.source
	}
	next, keys, err := r.scanPage(ctx, scan, f.cursor)
	if err != nil {
		r.log.Debug("refill scan failed: retrying", "node", h.addr, "error", err)
		return
	}
	if len(keys) > 0 {
		err = r.refillKeys(ctx, t, sources, keys, f)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if f.tries++; f.tries < refillTries {
			r.log.Debug("refill page failed: retrying", "node", h.addr, "error", err)
			return
		}
		// A page that cannot be copied (a value past what the reader
		// takes, a backend that keeps failing) must not hold the refill.
		r.log.Warn("refill page failed again: passed over", "node", h.addr, "keys", len(keys), "error", err)
		f.Unsolved += int64(len(keys))
	}
	f.tries = 0
	f.Scanned += int64(len(keys))
	f.cursor = next
	if next != "0" {
		return
	}
	if !f.own {
		f.own = true // then its own keys, for what was deleted since
		return
	}
	f.own, f.Passes = false, f.Passes+1
	f.done = true
	if !r.now().Before(h.until) {
		r.endRefill(h, "refilled")
	}
}

// endRefill ends node h's refill and lets it vote. mu is held.
func (r *Redlock) endRefill(h *nodeHealth, why string) {
	f := h.refill
	if f == nil {
		return
	}
	h.refill = nil
	h.refresh(r.now())
	r.log.Info("backend refill over", "node", h.addr, "why", why, "passes", f.Passes,
		"scanned", f.Scanned, "copied", f.Copied, "deleted", f.Deleted, "unsolved", f.Unsolved)
}

// fullest is the source holding the most keys (DBSIZE): one that lost
// its keys too, and whose restart is not seen yet, must not end a pass
// with nothing copied.
func (r *Redlock) fullest(ctx context.Context, sources []int) int {
	best, most := sources[0], int64(-1)
	for _, s := range sources {
		v, err := r.nodes[s].Do(ctx, "DBSIZE")
		if n, ok := v.(int64); err == nil && ok && n > most {
			best, most = s, n
		}
	}
	return best
}

// votesNow reports whether node i votes now, without waiting for a call.
func (r *Redlock) votesNow(i int) bool {
	_, err := r.vote(i)
	return err == nil
}

// scanPage is one SCAN page of node i from cursor.
func (r *Redlock) scanPage(ctx context.Context, i int, cursor string) (string, []string, error) {
	v, err := r.nodes[i].Do(ctx, "SCAN", cursor, "COUNT", refillPage)
	if err != nil {
		return "", nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", nil, fmt.Errorf("SCAN: unexpected reply %v", v)
	}
	next, _ := a[0].(string)
	items, _ := a[1].([]any)
	keys := make([]string, 0, len(items))
	for _, it := range items {
		k, _ := it.(string)
		if strings.HasPrefix(k, ReservedPrefix) && !strings.HasPrefix(k, VersionPrefix) {
			continue // the proxies' own state: the record, heartbeats, fences
		}
		keys = append(keys, k)
	}
	return next, keys, nil
}

// refillKeys reads keys on node t, then on every source, decides each,
// and writes the decisions to node t in one script call, each only where
// the key is still what t held when it was read (refillWriteScript).
func (r *Redlock) refillKeys(ctx context.Context, t int, sources []int, keys []string, f *refill) error {
	states := make([][]copyState, len(keys))
	short := fmt.Sprint(r.quarantineLength().Milliseconds())
	read := func(n int) ([]copyState, error) {
		v, err := r.nodes[n].Eval(ctx, refillReadScript, keys, short, VersionPrefix)
		if err != nil {
			return nil, err
		}
		a, ok := v.([]any)
		if !ok || len(a) != len(keys) {
			return nil, fmt.Errorf("refill read: unexpected reply %T", v)
		}
		out := make([]copyState, len(a))
		for i, e := range a {
			out[i] = asCopyState(e)
		}
		return out, nil
	}
	before, err := read(t)
	if err != nil {
		return err
	}
	for _, s := range sources {
		a, err := read(s)
		if err != nil {
			return err
		}
		for i := range a {
			states[i] = append(states[i], a[i])
		}
	}
	var wkeys []string
	args := []any{short}
	var copied, deleted, unsolved int64
	for i, k := range keys {
		was := "-"
		b := before[i]
		switch {
		case b.ttl == -3:
			continue // a lock's copy, or about to expire: not the refill's
		case b.ttl != -2:
			sum := sha1.Sum([]byte(b.dump))
			was = hex.EncodeToString(sum[:])
		}
		op, st := r.decideCopy(states[i])
		switch {
		case op == "r" && b.ttl == -1 && st.ttl == -1 && b.digest == st.digest:
			// It holds that already (a later pass, or a write since): no
			// RESTORE of the same content.
		case op == "r":
			wkeys, args = append(wkeys, k), append(args, "r", max(st.ttl, 0), st.dump, was)
		case op == "d" && b.ttl != -2:
			wkeys, args = append(wkeys, k), append(args, "d", 0, "", was)
		case op == "?":
			unsolved++
		}
	}
	if len(wkeys) > 0 {
		v, err := r.nodes[t].Eval(ctx, refillWriteScript, wkeys, args...)
		if err != nil {
			return err
		}
		n, err := asInts(v, 2)
		if err != nil {
			return fmt.Errorf("refill write: %w", err)
		}
		copied, deleted = n[0], n[1]
	}
	h := r.health[t]
	h.mu.Lock()
	f.Copied += copied
	f.Deleted += deleted
	f.Unsolved += unsolved
	h.mu.Unlock()
	return nil
}

// asCopyState decodes one key's entry of refillReadScript.
func asCopyState(v any) copyState {
	a, _ := v.([]any)
	st := copyState{ttl: -3}
	if len(a) == 6 {
		st.ttl, _ = a[0].(int64)
		st.dump, _ = a[1].(string)
		st.version.n, _ = a[2].(int64)
		st.version.id, _ = a[3].(string)
		st.digest, _ = a[4].(string)
		c, _ := a[5].(int64)
		st.clean = c == 1
	}
	return st
}

// decideCopy decides one key from the sources' states: "r" copy st, "d"
// delete it, "" leave it (not data that outlives the quarantine), "?" the
// sources disagree. What a quorum of all the backends holds alike wins
// (gone, not copied, or one content); else a versioned string's newest
// version, a delete's included, where the key holds what that version
// wrote (what a read would answer and write back: register.go); a key a
// lock command changed since is left to the reads.
func (r *Redlock) decideCopy(states []copyState) (string, copyState) {
	gone, skip := 0, 0
	same := make(map[string]int)
	newest := copyState{ttl: -3}
	for _, st := range states {
		switch st.ttl {
		case -2:
			gone++
		case -3:
			skip++
		default:
			same[st.digest]++
		}
		if newest.version.less(st.version) {
			newest = st
		}
	}
	switch {
	case gone >= r.quorum:
		return "d", copyState{}
	case skip >= r.quorum:
		return "", copyState{}
	}
	for _, st := range states {
		if st.ttl >= -1 && same[st.digest] >= r.quorum {
			return "r", st
		}
	}
	switch {
	case newest.version.n == 0 && gone+skip == len(states):
		return "", copyState{}
	case newest.version.n == 0 || !newest.clean:
		return "?", copyState{}
	case newest.ttl == -2:
		return "d", copyState{}
	case newest.ttl == -3:
		return "", copyState{}
	}
	return "r", newest // a versioned string: its newest version
}
