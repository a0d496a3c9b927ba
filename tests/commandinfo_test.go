package tests

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

// commandInfoDiffers lists what of the proxy's COMMAND INFO differs from
// Redis's by design, by command, with the reason.
var commandInfoDiffers = map[string]string{
	// First, last and step.
	"ssubscribe keys":   "shard channels are channels to the proxy, not keys: no key pattern applies to them",
	"sunsubscribe keys": "shard channels are channels to the proxy, not keys",
	"spublish keys":     "shard channels are channels to the proxy, not keys",
	// Flags.
	"eval write":      "a script run by the proxy may write (its keys are tracked as written); Redis leaves it to the script's own flags",
	"evalsha write":   "as EVAL",
	"dbsize readonly": "the proxy's DBSIZE reads no key (always 0), so it is not among the reads a transaction may queue",
}

// commandInfoFlags are the COMMAND INFO flags the proxy reports, each as
// Redis does. The others (fast, denyoom, loading, stale, noscript,
// allow_busy, skip_monitor, skip_slowlog, no_mandatory_keys, pubsub,
// admin, …) describe how one Redis runs a command (memory, loading,
// scripts, replication, its slow log), which the proxy does not share:
// it reports none of them.
var commandInfoFlags = []string{"write", "readonly", "no_auth", "movablekeys", "blocking"}

// TestCommandInfoAsRedis compares the proxy's COMMAND INFO with a real
// redis-server's for every command the proxy serves that Redis has: the
// arity, the first and last key and the step, the flags the proxy
// reports, and the keys the key specifications find in a call.
func TestCommandInfoAsRedis(t *testing.T) {
	backend := startRedis(t)
	p := startProxy(t, []*redisProc{backend}, "")
	ctx := testCtx(t, 60*time.Second)
	pc, rc := p.Client(nil), backend.Client()
	names, err := pc.Do(ctx, "COMMAND", "LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	// Commands that changed after the Redis 7.0 a machine may have; the
	// proxy answers as Redis 7.2 (ZRANK … WITHSCORE) or later.
	newer := map[string]bool{}
	if version := infoField(t, rc, "server", "redis_version"); version < "7.2" {
		newer["zrank"], newer["zrevrank"] = true, true
		t.Logf("redis-server %s: ZRANK and ZREVRANK compared from Redis 7.2 on only", version)
	}
	compared := 0
	for _, name := range names {
		want, err := rc.Do(ctx, "COMMAND", "INFO", name).Slice()
		if err != nil {
			t.Fatal(err)
		}
		got, err := pc.Do(ctx, "COMMAND", "INFO", name).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if want[0] == nil || newer[name] {
			continue // the proxy's own (LOCK …), or not in this Redis (HEXPIRE before 7.4)
		}
		compared++
		w, g := want[0].([]any), got[0].([]any)
		if w[1] != g[1] && commandInfoDiffers[name+" arity"] == "" {
			t.Errorf("%s: arity %v, Redis %v", name, g[1], w[1])
		}
		if fmt.Sprint(w[3:6]) != fmt.Sprint(g[3:6]) && commandInfoDiffers[name+" keys"] == "" {
			t.Errorf("%s: first, last, step %v, Redis %v", name, g[3:6], w[3:6])
		}
		gf := infoFlags(g[2])
		for _, f := range commandInfoFlags {
			if slices.Contains(infoFlags(w[2]), f) != slices.Contains(gf, f) && commandInfoDiffers[name+" "+f] == "" {
				t.Errorf("%s: flags %v, Redis %v: %s differs", name, gf, w[2], f)
			}
		}
		for _, f := range gf {
			if !slices.Contains(commandInfoFlags, f) {
				t.Errorf("%s: flag %s, not among those the proxy reports", name, f)
			}
		}
		if commandInfoDiffers[name+" keys"] != "" {
			continue
		}
		arity := int(w[1].(int64))
		call := sampleCall(arity)
		gk, err := specKeys(g[8], call)
		if err != nil {
			t.Errorf("%s: the proxy's key specs: %v", name, err)
		}
		wk, err := specKeys(w[8], call)
		if err != nil {
			t.Fatalf("%s: Redis's key specs: %v", name, err)
		}
		if !slices.Equal(gk, wk) {
			t.Errorf("%s: key specs find keys at %v of %d arguments, Redis's at %v (%v)", name, gk, len(call), wk, w[8])
		}
	}
	t.Logf("compared %d commands with Redis's", compared)
	if compared < 100 {
		t.Errorf("compared %d commands with Redis's, want at least 100", compared)
	}
}

func infoFlags(v any) []string {
	var out []string
	for _, f := range v.([]any) {
		out = append(out, fmt.Sprint(f))
	}
	return out
}

// sampleCall is the arguments of a call (the name at 0) of a command of
// arity: as many as it takes, or four more than its least, each "2", so
// that a count of keys (ZUNION numkeys) counts two.
func sampleCall(arity int) []string {
	n := arity
	if arity < 0 {
		n = -arity + 4
	}
	call := make([]string, n)
	for i := range call {
		call[i] = "2"
	}
	return call
}

// specKeys is the positions of call that key specs (COMMAND INFO's
// ninth field) find keys at.
func specKeys(v any, call []string) ([]int, error) {
	var keys []int
	for _, s := range v.([]any) {
		spec := pairs(s)
		begin, find := pairs(spec["begin_search"]), pairs(spec["find_keys"])
		if begin["type"] == "unknown" || find["type"] == "unknown" {
			continue // SORT's BY, GET and STORE: keys no spec can locate
		}
		if begin["type"] != "index" {
			return nil, fmt.Errorf("begin_search %v not read by this test", begin)
		}
		start := int(pairs(begin["spec"])["index"].(int64))
		how := pairs(find["spec"])
		switch find["type"] {
		case "range":
			last, step := int(how["lastkey"].(int64)), int(how["keystep"].(int64))
			end := start + last
			if last < 0 {
				end = len(call) + last
			}
			for p := start; p <= end && p < len(call); p += step {
				keys = append(keys, p)
			}
		case "keynum":
			at := start + int(how["keynumidx"].(int64))
			n, err := strconv.Atoi(call[at])
			if err != nil {
				return nil, err
			}
			first, step := start+int(how["firstkey"].(int64)), int(how["keystep"].(int64))
			for i := 0; i < n; i++ {
				keys = append(keys, first+i*step)
			}
		default:
			return nil, fmt.Errorf("find_keys %v not read by this test", find)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// pairs reads a map: a RESP3 map, or a RESP2 flat key/value array.
func pairs(v any) map[string]any {
	m := map[string]any{}
	switch v := v.(type) {
	case map[any]any:
		for k, e := range v {
			m[fmt.Sprint(k)] = e
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			m[fmt.Sprint(v[i])] = v[i+1]
		}
	}
	return m
}
