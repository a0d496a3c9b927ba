package tests

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// keyedSequence is what lock libraries' own test suites send outside
// scripts: hash, set, sorted-set, list and string commands, a few of
// them on a key of the wrong type.
var keyedSequence = [][]any{
	{"SADD", "s", "a", "b", "c"}, {"SADD", "s", "a"}, {"SISMEMBER", "s", "b"}, {"SISMEMBER", "s", "z"},
	{"SMISMEMBER", "s", "a", "z"}, {"SCARD", "s"}, {"SMEMBERS", "s"}, {"SREM", "s", "c"},
	{"SADD", "s2", "b", "x"}, {"SINTER", "s", "s2"}, {"SUNION", "s", "s2"}, {"SINTERSTORE", "s3", "s", "s2"},
	{"SMOVE", "s", "s2", "a"}, {"SMEMBERS", "s2"},
	{"HSET", "h", "f", "1", "g", "two"}, {"HGET", "h", "f"}, {"HGET", "h", "nope"}, {"HGETALL", "h"},
	{"HINCRBY", "h", "f", "41"}, {"HINCRBYFLOAT", "h", "f", "0.5"}, {"HMGET", "h", "f", "g", "x"},
	{"HEXISTS", "h", "g"}, {"HLEN", "h"}, {"HKEYS", "h"}, {"HVALS", "h"}, {"HSETNX", "h", "g", "x"},
	{"HDEL", "h", "g"}, {"HSTRLEN", "h", "f"},
	{"ZADD", "z", "1", "one", "2", "two", "3", "three"}, {"ZADD", "z", "XX", "CH", "5", "one"},
	{"ZRANGE", "z", "0", "-1"}, {"ZRANGE", "z", "0", "-1", "WITHSCORES"}, {"ZRANGEBYSCORE", "z", "2", "+inf"},
	{"ZREVRANGE", "z", "0", "1"}, {"ZSCORE", "z", "two"}, {"ZRANK", "z", "one"}, {"ZCOUNT", "z", "-inf", "+inf"},
	{"ZINCRBY", "z", "2", "two"}, {"ZPOPMIN", "z"}, {"ZUNIONSTORE", "zu", "2", "z", "z"}, {"ZRANGE", "zu", "0", "-1", "WITHSCORES"},
	{"ZCARD", "z"}, {"ZREM", "z", "two", "nope"},
	{"LPUSH", "l", "a", "b"}, {"RPUSH", "l", "c"}, {"LRANGE", "l", "0", "-1"}, {"LINDEX", "l", "1"},
	{"LINSERT", "l", "BEFORE", "c", "x"}, {"LSET", "l", "0", "B"}, {"LREM", "l", "0", "a"}, {"LTRIM", "l", "0", "1"},
	{"LRANGE", "l", "0", "-1"}, {"LPOS", "l", "x"}, {"RPOPLPUSH", "l", "l2"}, {"LLEN", "l"},
	{"INCRBY", "n", "5"}, {"INCRBY", "n", "7"}, {"INCRBYFLOAT", "f", "1.5"},
	{"SET", "str", "hello"}, {"APPEND", "str", " world"}, {"STRLEN", "str"}, {"SETRANGE", "str", "6", "there"},
	{"GETRANGE", "str", "0", "4"}, {"GET", "str"}, {"MSET", "m1", "a", "m2", "b"}, {"MGET", "m1", "m2", "nope"},
	{"MSETNX", "m1", "x", "m3", "y"}, {"SETNX", "m4", "v"}, {"GETDEL", "m4"}, {"EXISTS", "m1", "m2", "m4"},
	{"SETBIT", "bits", "7", "1"}, {"GETBIT", "bits", "7"}, {"BITCOUNT", "bits"}, {"BITPOS", "bits", "1"},
	{"TYPE", "h"}, {"TYPE", "z"}, {"UNLINK", "m1", "m2"}, {"TOUCH", "s", "nope"},
	{"SADD", "h", "x"}, {"HGET", "s", "x"}, {"LPUSH", "str", "x"}, {"ZADD", "z", "nan", "x"}, {"SETRANGE", "str", "-1", "x"},
}

// unorderedReplies are the commands whose array reply has each server's
// own order: compared as multisets.
var unorderedReplies = map[string]bool{"SMEMBERS": true, "SINTER": true, "SUNION": true, "SDIFF": true, "HKEYS": true, "HVALS": true, "HGETALL": true}

// TestKeyedCommandsAsOneRedis: the same sequence of keyed commands, sent
// outside scripts, answers through a proxy over three backends what it
// answers on one redis-server (RESP2; unordered replies compared as
// multisets, errors by their text).
func TestKeyedCommandsAsOneRedis(t *testing.T) {
	t.Parallel()
	ref := startRedis(t)
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 60*time.Second)
	direct := redis.NewClient(&redis.Options{Addr: ref.Addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = direct.Close() })
	proxy := p.Client(&redis.Options{Protocol: 2, DisableIdentity: true})

	for _, cmd := range keyedSequence {
		name := cmd[0].(string)
		want, werr := direct.Do(ctx, cmd...).Result()
		got, gerr := proxy.Do(ctx, cmd...).Result()
		if unorderedReplies[name] {
			want, got = sorted(want), sorted(got)
		}
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) {
			t.Errorf("%q: proxy answered %#v (%v), one Redis %#v (%v)", cmd, got, gerr, want, werr)
		}
	}
	// Every backend holds what one Redis holds (a vote answers at a
	// quorum: the last copy may land a moment later).
	testkit.Eventually(t, 10*time.Second, "hash h on every backend", func() bool {
		for _, r := range rs {
			if got, err := r.Client().HGetAll(ctx, "h").Result(); err != nil || got["f"] != "42.5" {
				return false
			}
		}
		return true
	})
	// What cannot run by vote is refused with the reason.
	for _, cmd := range [][]any{{"SPOP", "s"}, {"KEYS", "*"}, {"HRANDFIELD", "h"}} {
		err := proxy.Do(ctx, cmd...).Err()
		if err == nil || !strings.Contains(err.Error(), "cannot serve this command: "+cmd[0].(string)) {
			t.Errorf("%q: %v, want refused with the reason", cmd, err)
		}
	}
}

// sorted is an array reply with its elements in one order.
func sorted(v any) any {
	a, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]string, len(a))
	for i, e := range a {
		out[i] = fmt.Sprint(e)
	}
	sort.Strings(out)
	return out
}

// TestTrackingKeyed: a keyed read outside a script (HGET, SMEMBERS) is
// tracked, and a keyed write invalidates it: another client's always, the
// client's own unless NOLOOP, as on Redis.
func TestTrackingKeyed(t *testing.T) {
	t.Parallel()
	pa, writer := trackingSetup(t)
	for _, noloop := range []bool{false, true} {
		c := testkit.Dial(t, pa.Addr())
		c.Do("HELLO", "3")
		on := []string{"CLIENT", "TRACKING", "ON"}
		if noloop {
			on = append(on, "NOLOOP")
		}
		doWant(t, c, "OK", on...)
		h, s := fmt.Sprintf("kh-%v", noloop), fmt.Sprintf("ks-%v", noloop)
		doWant(t, c, nil, "HGET", h, "f")
		doWant(t, c, int64(1), "HSET", h, "f", "own")
		if noloop {
			expectNothing(t, c, "NOLOOP: its own HSET")
		} else {
			expect(t, c, invalidate(h), "its own HSET")
		}
		doWant(t, c, "own", "HGET", h, "f")
		doWant(t, writer, int64(0), "HSET", h, "f", "theirs")
		expect(t, c, invalidate(h), "another client's HSET")
		c.Do("SMEMBERS", s)
		doWant(t, writer, int64(1), "SADD", s, "m")
		expect(t, c, invalidate(s), "another client's SADD")
		expectNothing(t, c, "after the invalidations")
	}
}

// TestKeyedRESP3Clients: a RESP3 go-redis client reads the replies of
// keyed commands through the proxy as it reads them from one Redis:
// HGETALL's map, SMEMBERS' set, scores (bulk strings from the proxy,
// doubles from Redis).
func TestKeyedRESP3Clients(t *testing.T) {
	t.Parallel()
	ref := startRedis(t)
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 60*time.Second)
	direct := redis.NewClient(&redis.Options{Addr: ref.Addr(), Protocol: 3, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = direct.Close() })
	proxy := p.Client(&redis.Options{Protocol: 3, DisableIdentity: true})
	for _, c := range []*redis.Client{direct, proxy} {
		c.HSet(ctx, "h3", "f", "1", "g", "2")
		c.SAdd(ctx, "s3", "a", "b", "c")
		c.ZAdd(ctx, "z3", redis.Z{Score: 1.5, Member: "one"}, redis.Z{Score: 2, Member: "two"})
	}
	check := func(what string, f func(c *redis.Client) (any, error)) {
		t.Helper()
		want, werr := f(direct)
		got, gerr := f(proxy)
		if werr != nil || gerr != nil || !reflect.DeepEqual(want, got) {
			t.Errorf("%s: proxy %#v (%v), one Redis %#v (%v)", what, got, gerr, want, werr)
		}
	}
	check("HGETALL", func(c *redis.Client) (any, error) { return c.HGetAll(ctx, "h3").Result() })
	check("SMEMBERS", func(c *redis.Client) (any, error) { return c.SMembersMap(ctx, "s3").Result() })
	check("ZSCORE", func(c *redis.Client) (any, error) { return c.ZScore(ctx, "z3", "one").Result() })
	check("ZRANGE WITHSCORES", func(c *redis.Client) (any, error) { return c.ZRangeWithScores(ctx, "z3", 0, -1).Result() })
	check("ZINCRBY", func(c *redis.Client) (any, error) { return c.ZIncrBy(ctx, "z3", 1, "two").Result() })
	check("HINCRBYFLOAT", func(c *redis.Client) (any, error) { return c.HIncrByFloat(ctx, "h3", "f", 0.25).Result() })
	check("HKEYS", func(c *redis.Client) (any, error) {
		k, err := c.HKeys(ctx, "h3").Result()
		sort.Strings(k)
		return k, err
	})
}
