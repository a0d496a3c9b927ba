package tests

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestDataSurvivesTheProxies: data of every type written through the only
// proxy, by every write command it serves, with and without expiry, is
// stored on every backend with exactly the expiry the client gave, and
// survives that proxy stopped for longer than max_ttl + 3 × default_ttl
// (docs/safety.md, "Locks and data"): nobody renews data, so nothing of it
// depends on a proxy running. That holds too for data written over a
// lock's key or beside it in one command (MSET over a hold or a lock with
// a ttl, COPY of a hold, APPEND to a hold through the proxy that keeps
// it): the write takes the key, as on one Redis. Before, every write
// without expiry was a lease the proxy renewed, and all of it was gone
// when the proxy came back; then a keyed command with one key this proxy
// knew as a lock (MSET lock v data v, COPY hold dst) ran clamped, and
// every key it wrote, data included, was held on a lease and gone after
// the outage; and so was every key a script by vote wrote, where now
// only a key the script read before writing it is a lock's.
func TestDataSurvivesTheProxies(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	const hcl = "max_ttl = \"2s\"\ndefault_ttl = \"500ms\"\n"
	p := startProxy(t, rs, hcl)
	ctx := testCtx(t, 90*time.Second)
	c := p.Client(nil)
	hour := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	hourMs := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	writes := [][]any{
		// strings
		{"SET", "s", "alice"},
		{"SET", "se", "bob", "EX", "3600"},
		{"SET", "sp", "carol", "PX", "30000"}, // beyond max_ttl: data keeps it as given
		{"SET", "sat", "v", "PXAT", hourMs},
		{"SETEX", "sx", "3600", "v"},
		{"PSETEX", "psx", "30000", "v"},
		{"MSET", "ms1", "a", "ms2", "b"},
		{"SETRANGE", "sr", "2", "x"},
		{"INCR", "n"},
		{"INCRBY", "nb", "5"},
		{"INCRBYFLOAT", "fl", "1.5"},
		{"APPEND", "ap", "xyz"},
		{"SET", "gs", "old"},
		{"GETSET", "gs", "new"},
		{"SET", "gx", "v"},
		{"GETEX", "gx", "EX", "3600"},
		{"SET", "gp", "v", "EX", "100"},
		{"GETEX", "gp", "PERSIST"},
		{"SET", "gd", "v"},
		{"GETDEL", "gd"},
		{"SET", "kt", "v", "EX", "3600"},
		{"SET", "kt", "w", "KEEPTTL"},
		{"SETBIT", "bit", "7", "1"},
		{"BITFIELD", "bf", "SET", "u8", "0", "5"},
		{"BITOP", "OR", "bo", "bit", "bf"},
		{"PFADD", "hll", "a", "b", "c"},
		{"PFMERGE", "hllm", "hll"},
		// hashes
		{"HSET", "h", "item", "3"},
		{"HINCRBY", "hi", "f", "2"},
		{"HINCRBYFLOAT", "hf", "f", "1.5"},
		{"HSETNX", "hn", "f", "v"},
		{"HMSET", "hm", "f", "v", "g", "w"},
		// lists
		{"RPUSH", "l", "x", "y"},
		{"LPUSH", "lp", "a", "b"},
		{"LINSERT", "lp", "BEFORE", "a", "c"},
		{"LSET", "lp", "0", "z"},
		{"RPUSH", "lsrc", "x", "y", "w"},
		{"LMOVE", "lsrc", "ldst", "LEFT", "RIGHT"},
		{"RPOPLPUSH", "lsrc", "lrp"},
		// sets
		{"SADD", "set", "a", "b"},
		{"SADD", "s1", "a", "b", "c"},
		{"SMOVE", "s1", "s2", "a"},
		{"SUNIONSTORE", "su", "s1", "s2"},
		{"SINTERSTORE", "si", "s1", "su"},
		{"SDIFFSTORE", "sd", "su", "s1"},
		// sorted sets, geo
		{"ZADD", "z", "1", "a", "2", "b"},
		{"ZINCRBY", "zi", "2", "a"},
		{"ZUNIONSTORE", "zu", "2", "z", "zi"},
		{"ZINTERSTORE", "zn", "2", "z", "zi"},
		{"ZRANGESTORE", "zr", "z", "0", "-1"},
		{"GEOADD", "geo", "13.361389", "38.115556", "Palermo"},
		{"GEOSEARCHSTORE", "geos", "geo", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"},
		// streams (an explicit id: '*' would differ between backends)
		{"XADD", "xs", "1-1", "f", "v"},
		{"XADD", "xs", "2-1", "f", "w"},
		{"XDEL", "xs", "1-1"},
		// generic: expiries and copies of data
		{"COPY", "h", "hcopy"},
		{"SET", "ex", "dave"},
		{"EXPIRE", "ex", "3600"},
		{"RPUSH", "eat", "x"},
		{"EXPIREAT", "eat", hour},
		{"SADD", "pex", "x"},
		{"PEXPIRE", "pex", "30000"},
		{"ZADD", "peat", "1", "x"},
		{"PEXPIREAT", "peat", hourMs},
		{"HSET", "hex", "f", "v"},
		{"EXPIRE", "hex", "3600"},
		{"PERSIST", "hex"},
		{"SET", "pe", "erin", "PX", "1500"},
		{"PERSIST", "pe"},
		// data over a lock's key, or beside it in one command
		{"SET", "lk", "t", "NX"},
		{"MSET", "lk", "data", "lkd", "v"},
		{"SET", "lt", "t", "NX", "PX", "1500"},
		{"MSET", "ltd", "v", "lt", "data"},
		{"SETNX", "lh", "t"},
		{"COPY", "lh", "lhc"},
		{"SETNX", "la", "t"},
		{"APPEND", "la", "x"},
		{"SETNX", "lx", "t"},
		{"SETEX", "lx", "3600", "data"},
		// scripts by vote that write without reading first
		{"EVAL", "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('HSET', KEYS[2], 'f', ARGV[1])", "2", "evs", "evh", "v"},
		{"EVAL", "redis.call('INCR', KEYS[1]) return redis.call('EXPIRE', KEYS[1], 3600)", "1", "evi"},
		{"EVAL", "redis.call('SADD', KEYS[1], 'a') return redis.call('PEXPIRE', KEYS[1], 30000)", "1", "evp"},
	}
	for _, w := range writes {
		if err := c.Do(ctx, w...).Err(); err != nil {
			t.Fatalf("%v: %v", w, err)
		}
	}
	// Every backend stores the expiry the client gave, none meaning none.
	wantTTL := map[string]time.Duration{
		"s": -1, "se": time.Hour, "sp": 30 * time.Second, "sat": time.Hour, "sx": time.Hour, "psx": 30 * time.Second,
		"ms1": -1, "ms2": -1, "sr": -1, "n": -1, "nb": -1, "fl": -1, "ap": -1, "gs": -1, "gx": time.Hour, "gp": -1,
		"kt": time.Hour, "bit": -1, "bf": -1, "bo": -1, "hll": -1, "hllm": -1,
		"h": -1, "hi": -1, "hf": -1, "hn": -1, "hm": -1,
		"l": -1, "lp": -1, "lsrc": -1, "ldst": -1, "lrp": -1,
		"set": -1, "s1": -1, "s2": -1, "su": -1, "si": -1, "sd": -1,
		"z": -1, "zi": -1, "zu": -1, "zn": -1, "zr": -1, "geo": -1, "geos": -1, "xs": -1,
		"hcopy": -1, "ex": time.Hour, "eat": time.Hour, "pex": 30 * time.Second, "peat": time.Hour, "hex": -1, "pe": -1,
		"lk": -1, "lkd": -1, "lt": -1, "ltd": -1, "lhc": -1, "la": -1, "lx": time.Hour,
		"evs": -1, "evh": -1, "evi": time.Hour, "evp": 30 * time.Second,
	}
	// The hold APPEND changed in place becomes data at its next renewal,
	// within a third of default_ttl.
	time.Sleep(2 * time.Second)
	contents := map[string]string{}
	for i, r := range rs {
		b := r.Client()
		for k, want := range wantTTL {
			got, err := b.PTTL(ctx, k).Result()
			switch {
			case err != nil:
				t.Fatalf("backend %d PTTL %s: %v", i, k, err)
			case want < 0 && got != -1: // go-redis: -1 for no expiry
				t.Errorf("backend %d: %s has ttl %v, want none", i, k, got)
			case want > 0 && (got <= want-time.Minute || got > want):
				t.Errorf("backend %d: %s has ttl %v, want about %v", i, k, got, want)
			}
			v := backendContents(ctx, t, b, k)
			if i == 0 {
				contents[k] = v
			} else if v != contents[k] {
				t.Errorf("backend %d: %s holds %s, backend 0 %s", i, k, v, contents[k])
			}
		}
		if n, err := b.Exists(ctx, "gd").Result(); err != nil || n != 0 {
			t.Errorf("backend %d: GETDEL gd left it (%v, %v)", i, n, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	p.terminate()
	time.Sleep(2*time.Second + 3*500*time.Millisecond + time.Second) // the proxies' outage: no key may depend on them
	for i, r := range rs {
		b := r.Client()
		for k := range wantTTL {
			if v := backendContents(ctx, t, b, k); v != contents[k] {
				t.Errorf("backend %d: %s holds %s after the outage, %s before", i, k, v, contents[k])
			}
		}
	}
	p2 := startProxy(t, rs, hcl)
	c2 := p2.Client(nil)
	for k, want := range map[string]string{"s": "alice", "se": "bob", "n": "1", "ap": "xyz", "ex": "dave", "gs": "new", "pe": "erin",
		"lk": "data", "lkd": "v", "lt": "data", "ltd": "v", "lhc": "t", "la": "tx", "lx": "data", "ms2": "b", "fl": "1.5", "evs": "v", "evi": "1"} {
		if got, err := c2.Get(ctx, k).Result(); err != nil || got != want {
			t.Fatalf("GET %s after the outage = %q, %v; want %q", k, got, err, want)
		}
	}
	if got, err := c2.HGet(ctx, "h", "item").Result(); err != nil || got != "3" {
		t.Fatalf("HGET h item = %q, %v", got, err)
	}
	got, err := c2.SMembers(ctx, "set").Result()
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("SMEMBERS set = %q, %v", got, err)
	}
	if got, err := c2.ZScore(ctx, "z", "a").Result(); err != nil || got != 1 {
		t.Fatalf("ZSCORE z a = %v, %v", got, err)
	}
	if got, err := c2.LRange(ctx, "l", 0, -1).Result(); err != nil || !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("LRANGE l = %q, %v", got, err)
	}
	if got, err := c2.TTL(ctx, "s").Result(); err != nil || got != -1 {
		t.Fatalf("TTL s = %v, %v; want -1", got, err)
	}
}

// backendContents is key's type and contents on one backend, as a string
// that two backends holding the same data print alike.
func backendContents(ctx context.Context, t *testing.T, b *redis.Client, key string) string {
	t.Helper()
	typ, err := b.Type(ctx, key).Result()
	if err != nil {
		t.Fatalf("TYPE %s: %v", key, err)
	}
	var v any
	switch typ {
	case "string":
		v, err = b.Get(ctx, key).Result()
	case "hash":
		var m map[string]string
		m, err = b.HGetAll(ctx, key).Result()
		keys := slices.Sorted(maps.Keys(m))
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+m[k])
		}
		v = kv
	case "list":
		v, err = b.LRange(ctx, key, 0, -1).Result()
	case "set":
		var ms []string
		ms, err = b.SMembers(ctx, key).Result()
		slices.Sort(ms)
		v = ms
	case "zset":
		v, err = b.ZRangeWithScores(ctx, key, 0, -1).Result()
	case "stream":
		v, err = b.XRange(ctx, key, "-", "+").Result()
	}
	if err != nil {
		t.Fatalf("read %s %s: %v", typ, key, err)
	}
	return fmt.Sprintf("%s:%v", typ, v)
}

// TestDataOverAnEndedLockTakesTheClientsExpiry: a key that was a lock and
// is data now (written with SET through another proxy than the one that
// holds or granted the lock, or after its release) takes exactly the
// expiry the client gives it next, through either proxy: EXPIRE 3600 is
// an hour on every backend and PERSIST none, not a lease the tier renews
// (which every proxy down longer than default_ttl would lose). A key
// that still holds its lock's value keeps the lock rule: its copies carry
// the lease. Before, each proxy decided from its memory (the holds it
// keeps, the record as of its last round, its grants), as old as a
// renewal or a round: every data case below was put on a lease.
func TestDataOverAnEndedLockTakesTheClientsExpiry(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	a := startProxy(t, rs, holdsHCL)
	b := startProxy(t, rs, holdsHCL)
	ca, cb := a.Client(nil), b.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	do := func(c *redis.Client, args ...any) { t.Helper(); mustDo(ctx, t, c, args...) }
	for _, k := range []string{"ended:del", "ended:persist", "lock:held"} {
		do(ca, "SETNX", k, "t")
	}
	recordSeen(ctx, t, []*redis.Client{cb}, "ended:del", "ended:persist", "lock:held")
	// Deleted through the proxy that kept it, then data through B.
	do(ca, "DEL", "ended:del")
	do(cb, "SET", "ended:del", "data")
	do(cb, "EXPIRE", "ended:del", "3600")
	// Overwritten through B while A keeps it; its expiry through A.
	do(ca, "SETNX", "ended:over", "t")
	do(cb, "SET", "ended:over", "data")
	do(ca, "EXPIRE", "ended:over", "3600")
	// A lock with a ttl granted through A, overwritten through B.
	do(ca, "LOCK", "ended:lock", "3000")
	do(cb, "SET", "ended:lock", "data")
	do(ca, "PEXPIRE", "ended:lock", "3600000")
	// Given an expiry through B, then persisted through A.
	do(cb, "SET", "ended:persist", "data", "EX", "100")
	do(ca, "PERSIST", "ended:persist")
	// Still a lock: held through A, an hour asked through B.
	do(cb, "EXPIRE", "lock:held", "3600")
	want := map[string]time.Duration{"ended:del": time.Hour, "ended:over": time.Hour, "ended:lock": time.Hour, "ended:persist": -1}
	for i, r := range rs {
		bc := r.Client()
		for k, ttl := range want {
			got, err := bc.PTTL(ctx, k).Result()
			switch {
			case err != nil:
				t.Fatalf("backend %d PTTL %s: %v", i, k, err)
			case ttl < 0 && got != -1:
				t.Errorf("backend %d: %s has ttl %v, want none", i, k, got)
			case ttl > 0 && (got <= ttl-time.Minute || got > ttl):
				t.Errorf("backend %d: %s has ttl %v, want about %v", i, k, got, ttl)
			}
		}
		if got, err := bc.PTTL(ctx, "lock:held").Result(); err != nil || got <= 0 || got > 2*time.Second {
			t.Errorf("backend %d: the hold given an hour through B has ttl %v, %v; want its lease", i, got, err)
		}
	}
	for _, c := range []*redis.Client{ca, cb} {
		if got, err := c.TTL(ctx, "lock:held").Result(); err != nil || got < 3500*time.Second {
			t.Errorf("TTL of the hold given an hour = %v, %v", got, err)
		}
	}
}

// TestFarExpiriesKeepTheKey: an expiry past what a Go duration holds
// (about 292 years: EXPIRE of 9999999999 s, PEXPIREAT of the largest
// integer, SET … EX of it, GETEX) is stored saturated at that bound, and
// read back so: before, rounding it up to whole milliseconds wrapped it
// negative and the key was deleted, and a PTTL that large read as none.
func TestFarExpiriesKeepTheKey(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	c := startProxy(t, rs, "").Client(nil)
	ctx := testCtx(t, 30*time.Second)
	do := func(args ...any) { t.Helper(); mustDo(ctx, t, c, args...) }
	const far = 9223372036 // s: saturated (go-redis's TTL would wrap it too)
	for _, k := range []string{"far:expire", "far:pexpireat", "far:set", "far:getex"} {
		do("SET", k, "v")
	}
	do("EXPIRE", "far:expire", "9999999999")
	do("PEXPIREAT", "far:pexpireat", "9223372036854775807")
	do("SET", "far:set", "v", "EX", "9999999999")
	do("GETEX", "far:getex", "EX", "9999999999")
	for _, k := range []string{"far:expire", "far:pexpireat", "far:set", "far:getex"} {
		if got, err := c.Do(ctx, "TTL", k).Int64(); err != nil || got < far {
			t.Errorf("TTL %s = %v, %v; want at least %v", k, got, err, far)
		}
	}
}

// TestLockThroughAnotherProxyKeepsTheLockRule: a lock with a ttl granted
// through proxy A (LOCK, SET NX PX, SET NX EX, one extended through A
// past its first ttl, a script's acquire, a lock a script extended past
// its first ttl) is a lock through proxy B too (and a release by a
// script takes the lock's marker with it), which neither
// granted nor holds it: EXPIRE and PEXPIRE of an hour, PERSIST and SET XX
// of its value with an hour, sent through B, keep its copies within
// max_ttl and hold it instead, and it is still there after its own ttl
// and max_ttl have passed. Data beside it, given an hour through B, has
// the hour on every backend. Before, B found no lock it knew of and set
// the hour on every copy of the locks (docs/safety.md, "Locks and data":
// a majority restarted empty at once would then have been back in the
// vote while the others still held the lock).
func TestLockThroughAnotherProxyKeepsTheLockRule(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	const hcl = "default_ttl = \"2s\"\nmax_ttl = \"10s\""
	a := startProxy(t, rs, hcl)
	b := startProxy(t, rs, hcl)
	ca, cb := a.Client(nil), b.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	do := func(c *redis.Client, args ...any) { t.Helper(); mustDo(ctx, t, c, args...) }
	start := time.Now()
	do(ca, "LOCK", "lock:native", "8000")
	do(ca, "SET", "lock:px", "v", "NX", "PX", "8000")
	do(ca, "SET", "lock:ex", "v", "NX", "EX", "8")
	do(ca, "SET", "lock:persist", "v", "NX", "PX", "8000")
	do(ca, "SET", "lock:xx", "v", "NX", "PX", "8000")
	do(ca, "SET", "lock:extended", "v", "NX", "PX", "2000")
	do(ca, "PEXPIRE", "lock:extended", "8000")
	// Acquire and extend scripts the proxy does not recognise, run by
	// vote through A: locks by what the run read (docs/safety.md,
	// "Scripts by vote"), marked by the clamp's epilogue.
	// (Each also counts its calls in a second key, data, which no library
	// script the proxy recognises does.)
	acquire := "if redis.call('GET', KEYS[1]) then return 0 end redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return redis.call('INCR', KEYS[2])"
	extend := "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end redis.call('PEXPIRE', KEYS[1], ARGV[2]) return redis.call('INCR', KEYS[2])"
	do(ca, "EVAL", acquire, "2", "lock:script", "calls", "v", "8000")
	do(ca, "SET", "lock:script-extended", "v", "NX", "PX", "2000")
	do(ca, "EVAL", extend, "2", "lock:script-extended", "calls", "v", "8000")
	do(ca, "SET", "data", "d")
	// lock:extended's first ttl (and its first marker's) is over; its
	// PEXPIRE kept it, the others have seconds left.
	time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
	do(cb, "EXPIRE", "lock:native", "3600")
	do(cb, "PEXPIRE", "lock:px", "3600000")
	do(cb, "EXPIRE", "lock:ex", "3600")
	do(cb, "PERSIST", "lock:persist")
	do(cb, "SET", "lock:xx", "v", "XX", "EX", "3600")
	do(cb, "EXPIRE", "lock:extended", "3600")
	do(cb, "EXPIRE", "data", "3600")
	locks := []string{"lock:native", "lock:px", "lock:ex", "lock:persist", "lock:xx", "lock:extended", "lock:script", "lock:script-extended"}
	do(cb, "EXPIRE", "lock:script", "3600")
	do(cb, "EXPIRE", "lock:script-extended", "3600")
	for i, r := range rs {
		bc := r.Client()
		for _, k := range locks {
			if got, err := bc.PTTL(ctx, k).Result(); err != nil || got <= 0 || got > 10*time.Second {
				t.Errorf("backend %d: lock %s given an hour (or none) through B has ttl %v, %v; want at most max_ttl", i, k, got, err)
			}
		}
		if got, err := bc.PTTL(ctx, "data").Result(); err != nil || got < 59*time.Minute {
			t.Errorf("backend %d: data given an hour through B has ttl %v, %v; want the hour", i, got, err)
		}
	}
	// Past every first ttl and max_ttl: only the tier's renewals keep them.
	time.Sleep(time.Until(start.Add(11 * time.Second)))
	for _, k := range locks {
		if n, err := cb.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("lock %s held through B: EXISTS = %v, %v after its ttl and max_ttl passed", k, n, err)
		}
	}
	if got, err := ca.TTL(ctx, "lock:px").Result(); err != nil || got < 3500*time.Second {
		t.Errorf("TTL of lock:px through A = %v, %v; want the hour asked through B", got, err)
	}
	// A release by a script takes the marker with the key, on each
	// backend that ran it (a quorum, when it answers), long before the
	// marker's own ttl.
	marked := func() (n int) {
		for _, r := range rs {
			if e, err := r.Client().Exists(ctx, "redlock-proxy:lock:lock:released").Result(); err == nil && e == 1 {
				n++
			}
		}
		return n
	}
	do(ca, "EVAL", acquire, "2", "lock:released", "calls", "v", "8000")
	testkit.Eventually(t, 20*time.Second, "lock:released marked on every backend", func() bool { return marked() == len(rs) })
	release := "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end redis.call('DEL', KEYS[1]) return redis.call('INCR', KEYS[2])"
	do(ca, "EVAL", release, "2", "lock:released", "calls", "v")
	if n := marked(); n > len(rs)-2 {
		t.Errorf("lock:released's marker is on %d of %d backends after a script released it, want at most %d", n, len(rs), len(rs)-2)
	}
}

// mustDo sends args through c and fails the test on an error reply.
func mustDo(ctx context.Context, t *testing.T, c *redis.Client, args ...any) {
	t.Helper()
	if err := c.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}
