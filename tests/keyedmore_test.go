package tests

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// keyedMoreSequence: HyperLogLog, geo, stream, COPY and SORT commands as
// one Redis answers them, a few on a key of the wrong type or with bad
// arguments.
var keyedMoreSequence = [][]any{
	{"PFADD", "hll", "a", "b", "c"}, {"PFADD", "hll", "a"}, {"PFCOUNT", "hll"},
	{"PFADD", "hll2", "c", "d"}, {"PFCOUNT", "hll", "hll2"}, {"PFMERGE", "hllu", "hll", "hll2"}, {"PFCOUNT", "hllu"},
	{"GEOADD", "geo", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"},
	{"GEOADD", "geo", "NX", "CH", "13.5", "38.1", "Palermo"}, {"GEOPOS", "geo", "Palermo", "nope"},
	{"GEODIST", "geo", "Palermo", "Catania", "km"}, {"GEOHASH", "geo", "Palermo", "Catania"},
	{"GEOSEARCH", "geo", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC", "WITHCOORD", "WITHDIST"},
	{"GEOSEARCH", "geo", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km"},
	{"GEOSEARCHSTORE", "geo2", "geo", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST"}, {"ZRANGE", "geo2", "0", "-1", "WITHSCORES"},
	{"GEORADIUS_RO", "geo", "15", "37", "200", "km", "WITHDIST", "ASC"}, {"GEORADIUSBYMEMBER_RO", "geo", "Palermo", "200", "km", "ASC"},
	{"GEOADD", "geo", "200", "100", "bad"},
	{"XADD", "st", "1-1", "f", "v"}, {"XADD", "st", "1-*", "f", "w"}, {"XADD", "st", "2-0", "g", "x", "h", "y"},
	{"XADD", "st", "1-0", "f", "old"}, {"XADD", "st", "MAXLEN", "=", "5", "3-*", "f", "z"},
	{"XADD", "st", "NOMKSTREAM", "4-1", "f", "v"}, {"XADD", "nost", "NOMKSTREAM", "4-1", "f", "v"},
	{"XLEN", "st"}, {"XRANGE", "st", "-", "+"}, {"XRANGE", "st", "-", "+", "COUNT", "2"}, {"XREVRANGE", "st", "+", "-", "COUNT", "1"},
	{"XDEL", "st", "1-1", "9-9"}, {"XTRIM", "st", "MAXLEN", "3"}, {"XTRIM", "st", "MINID", "=", "2-0"}, {"XRANGE", "st", "-", "+"},
	{"XSETID", "st", "10-0"}, {"XADD", "st", "10-*", "f", "v"}, {"XLEN", "st"},
	{"SET", "m1", "v"}, {"COPY", "m1", "m2"}, {"COPY", "m1", "m2"}, {"COPY", "m1", "m2", "REPLACE"}, {"GET", "m2"},
	{"COPY", "nope", "m3"}, {"COPY", "st", "st2"}, {"XLEN", "st2"},
	{"RPUSH", "nums", "3", "10", "1", "2"}, {"SORT", "nums"}, {"SORT", "nums", "DESC", "LIMIT", "1", "2"},
	{"SORT_RO", "nums", "ALPHA"}, {"SORT", "nums", "STORE", "sorted"}, {"LRANGE", "sorted", "0", "-1"},
	{"SADD", "set", "b", "a", "c"}, {"SORT", "set", "ALPHA"}, {"SORT", "set"},
	{"XADD", "hll", "5-5", "f", "v"}, {"PFADD", "st", "a"}, {"GEOADD", "st", "1", "1", "m"}, {"SORT", "st"},
	{"XADD", "st", "bad-id", "f", "v"}, {"XTRIM", "st", "SIDEWAYS", "3"},
}

// keyedMoreRefused are the forms of them every backend would run its own
// way, refused with the reason whatever the data.
var keyedMoreRefused = map[string][]any{
	"its id from each backend's clock":    {"XADD", "st", "*", "f", "v"},
	"trims where each backend's stream":   {"XTRIM", "st", "MAXLEN", "~", "1"},
	"XADD with ~":                         {"XADD", "st", "MINID", "~", "1", "20-1", "f", "v"},
	"XTRIM with ~ trims":                  {"XTRIM", "st", "LIMIT", "1", "MAXLEN", "~", "1"},
	"COPY with DB reaches another":        {"COPY", "m1", "m4", "DB", "1"},
	"SORT with BY or GET":                 {"SORT", "nums", "BY", "w_*"},
	"SORT_RO with BY or GET":              {"SORT_RO", "nums", "GET", "#"},
	"locale":                              {"SORT", "set", "ALPHA", "STORE", "s2"},
	"XREAD blocks":                        {"XREAD", "STREAMS", "st", "0"},
	"XREADGROUP blocks":                   {"XREADGROUP", "GROUP", "g", "c", "STREAMS", "st", ">"},
	"XGROUP keeps a stream's consumer":    {"XGROUP", "CREATE", "st", "g", "0"},
	"XINFO reports":                       {"XINFO", "STREAM", "st"},
	"GEORADIUS (deprecated) may write":    {"GEORADIUS", "geo", "15", "37", "200", "km"},
	"PFDEBUG administers":                 {"PFDEBUG", "GETREG", "hll"},
	"DUMP answers in each backend's own ": {"DUMP", "m1"},
}

// TestKeyedMoreAsOneRedis: the HyperLogLog, geo, stream, COPY and SORT
// commands, outside scripts and inside one, answer through a proxy over
// three backends what one redis-server answers; what every backend would
// run its own way is refused with the reason.
func TestKeyedMoreAsOneRedis(t *testing.T) {
	t.Parallel()
	ref := startRedis(t)
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 60*time.Second)
	direct := redis.NewClient(&redis.Options{Addr: ref.Addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = direct.Close() })
	proxy := p.Client(&redis.Options{Protocol: 2, DisableIdentity: true})

	same := func(what string, want, got any, werr, gerr error) {
		t.Helper()
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) {
			t.Errorf("%s: proxy answered %#v (%v), one Redis %#v (%v)", what, got, gerr, want, werr)
		}
	}
	for _, cmd := range keyedMoreSequence {
		want, werr := direct.Do(ctx, cmd...).Result()
		got, gerr := proxy.Do(ctx, cmd...).Result()
		same(fmt.Sprintf("%q", cmd), want, got, werr, gerr)
	}
	// The same commands from a script by vote, each with its key.
	for _, c := range []struct {
		src  string
		keys []string
		argv []any
	}{
		{"return redis.call('PFADD', KEYS[1], unpack(ARGV))", []string{"hll"}, []any{"x", "y"}},
		{"return redis.call('PFCOUNT', KEYS[1], KEYS[2])", []string{"hll", "hll2"}, nil},
		{"return redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT', 15, 37, 'BYRADIUS', ARGV[1], 'km', 'ASC')", []string{"geo"}, []any{"300"}},
		{"return redis.call('XADD', KEYS[1], '20-*', 'f', ARGV[1])", []string{"st"}, []any{"v"}},
		{"return redis.call('XRANGE', KEYS[1], '-', '+')", []string{"st"}, nil},
		{"return redis.call('COPY', KEYS[1], KEYS[2], 'REPLACE')", []string{"m1", "m5"}, nil},
		{"return redis.call('SORT', KEYS[1], 'LIMIT', ARGV[1], 2, 'STORE', KEYS[2])", []string{"nums", "sorted2"}, []any{"1"}},
		{"return redis.call('LRANGE', KEYS[1], 0, -1)", []string{"sorted2"}, nil},
	} {
		want, werr := direct.Eval(ctx, c.src, c.keys, c.argv...).Result()
		got, gerr := proxy.Eval(ctx, c.src, c.keys, c.argv...).Result()
		same(c.src, want, got, werr, gerr)
	}
	for why, cmd := range keyedMoreRefused {
		err := proxy.Do(ctx, cmd...).Err()
		if err == nil || !strings.Contains(err.Error(), "redlock-proxy cannot serve this command: ") || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want refused with %q", cmd, err, why)
		}
	}
	// The same forms from a script are refused before any backend runs it.
	for _, src := range []string{
		"return redis.call('XADD', KEYS[1], '*', 'f', 'v')",
		"return redis.call('XADD', KEYS[1], ARGV[1], 'f', 'v')",
		"return redis.call('COPY', KEYS[1], KEYS[2], 'DB', '1')",
		"return redis.call('SORT', KEYS[1], 'BY', 'w_*')",
	} {
		if err := proxy.Eval(ctx, src, []string{"st", "m6"}, "*").Err(); err == nil || !strings.Contains(err.Error(), "cannot run") && !strings.Contains(err.Error(), "refuse") {
			t.Errorf("%s: %v, want refused", src, err)
		}
	}
}

// TestEveryRedisCommandServedOrRefused: every command a redis-server
// knows is either served by the proxy (COMMAND LIST) or refused with
// the reason; a name Redis does not know is an unknown command, as there.
func TestEveryRedisCommandServedOrRefused(t *testing.T) {
	t.Parallel()
	ref := startRedis(t)
	p := startProxy(t, []*redisProc{startRedis(t)}, "")
	ctx := testCtx(t, 60*time.Second)
	proxy := p.Client(nil)
	served := map[string]bool{}
	names, err := proxy.Do(ctx, "COMMAND", "LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		served[n] = true
	}
	known, err := ref.Client().Do(ctx, "COMMAND", "LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, name := range known {
		if strings.Contains(name, "|") || served[name] {
			continue // a subcommand, or served
		}
		// No row: the proxy answers before it looks at the arguments.
		err := proxy.Do(ctx, name, "k").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR redlock-proxy cannot serve this command: ") {
			t.Errorf("%s: Redis has it, the proxy neither serves it nor says why: %v", name, err)
			continue
		}
		refused++
	}
	t.Logf("Redis knows %d names; the proxy serves %d and refuses %d with a reason", len(known), len(served), refused)
	if err := proxy.Do(ctx, "NOSUCHCOMMAND", "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR unknown command") {
		t.Errorf("NOSUCHCOMMAND: %v, want Redis's unknown command", err)
	}
}

// TestKeyedMoreWritesAreData: a key SADD, PFADD, GEOADD, XADD, COPY or
// SORT … STORE creates without expiry is data: every backend's copy has
// no expiry (before, each was leased and renewed by the proxy), TTL -1
// through the proxy, and still there after three leases. A COPY of a key
// set for 600 s carries 600 s on every backend.
func TestKeyedMoreWritesAreData(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, clampHCL)
	c := p.Client(nil)
	ctx := testCtx(t, 60*time.Second)
	writes := map[string][]any{
		"cl:set":    {"SADD", "cl:set", "a"},
		"cl:hll":    {"PFADD", "cl:hll", "a"},
		"cl:geo":    {"GEOADD", "cl:geo", "13.36", "38.11", "a"},
		"cl:stream": {"XADD", "cl:stream", "1-1", "f", "v"},
		"cl:copy":   {"COPY", "cl:set", "cl:copy"},
	}
	if err := c.Do(ctx, writes["cl:set"]...).Err(); err != nil {
		t.Fatal(err)
	}
	delete(writes, "cl:set")
	writes["cl:sorted"] = []any{"SORT", "cl:list", "STORE", "cl:sorted"}
	if err := c.RPush(ctx, "cl:list", "2", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range writes {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
	}
	keys := []string{"cl:set", "cl:hll", "cl:geo", "cl:stream", "cl:copy", "cl:sorted"}
	check := func(when string) {
		t.Helper()
		for _, k := range keys {
			backendsAsAsked(ctx, t, rs, k, -1)
			if ttl, err := c.TTL(ctx, k).Result(); err != nil || ttl != -1 {
				t.Errorf("%s: TTL %s through the proxy = %v, %v; want -1", when, k, ttl, err)
			}
		}
	}
	// A copy takes the expiry the proxy answers for its source, not the
	// source's lease on the backends.
	if err := c.Set(ctx, "cl:long", "v", 600*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(ctx, "COPY", "cl:long", "cl:longcopy").Int(); err != nil || n != 1 {
		t.Fatalf("COPY cl:long cl:longcopy = %v, %v", n, err)
	}
	if ttl, err := c.PTTL(ctx, "cl:longcopy").Result(); err != nil || ttl < 590*time.Second {
		t.Errorf("PTTL of a copy of a key set for 600 s = %v, %v; want about 600 s", ttl, err)
	}
	backendsAsAsked(ctx, t, rs, "cl:longcopy", 600*time.Second)
	check("at once")
	time.Sleep(3*clampMax + time.Second) // three leases: nobody renews data
	check("after three leases")
	for _, k := range keys {
		if n, err := c.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("EXISTS %s after three leases = %v, %v; want 1", k, n, err)
		}
	}
}
