package tests

import (
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// asOneRedisSequence: data commands whose replies, byte for byte in RESP2
// and RESP3, once differed from one redis-server's (each line says how).
var asOneRedisSequence = [][]string{
	// A backend older than the command or its form refused it with the
	// texts of a script ("Unknown Redis command called from script").
	{"ZADD", "z", "1", "a"}, {"ZRANK", "z", "a", "WITHSCORE"}, {"ZREVRANK", "z", "a", "WITHSCORE"},
	{"HSET", "h", "f", "v"}, {"HEXPIRE", "h", "10", "FIELDS", "1", "f"}, {"HTTL", "h", "FIELDS", "1", "f"},
	// Blocking pops: WRONGTYPE was NOQUORUM, BLMOVE's timeout $-1, and
	// BRPOPLPUSH refused.
	{"SET", "str", "v"}, {"BLPOP", "str", "0.01"}, {"BLMOVE", "str", "d", "LEFT", "RIGHT", "0.01"},
	{"BLMOVE", "nolist", "d", "LEFT", "RIGHT", "0.01"}, {"BRPOPLPUSH", "nolist", "d", "0.01"},
	{"RPUSH", "l", "a", "b"}, {"BRPOPLPUSH", "l", "d", "0.01"}, {"LRANGE", "d", "0", "-1"},
	// RESP3 scores were bulk strings, ranges WITHSCORES flat.
	{"ZADD", "s", "1", "a", "2.5", "b", "1e300", "big", "inf", "top", "-inf", "bottom", "0.1", "tenth"},
	{"ZSCORE", "s", "big"}, {"ZSCORE", "s", "top"}, {"ZMSCORE", "s", "tenth", "nope", "bottom"},
	{"ZRANGE", "s", "0", "-1", "WITHSCORES"}, {"ZRANGE", "s", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2", "WITHSCORES"},
	{"ZRANGEBYSCORE", "s", "(1", "+inf", "WITHSCORES"}, {"ZREVRANGE", "s", "0", "1", "WITHSCORES"},
	{"ZREVRANGEBYSCORE", "s", "+inf", "-inf", "WITHSCORES", "LIMIT", "0", "2"}, {"ZRANGE", "s", "0", "1"},
	{"ZUNION", "2", "s", "z", "WITHSCORES"}, {"ZINTER", "2", "s", "z", "WEIGHTS", "1", "2", "WITHSCORES"},
	{"ZDIFF", "2", "s", "z", "WITHSCORES"}, {"ZINCRBY", "s", "0.2", "tenth"}, {"ZADD", "s", "INCR", "1", "a"},
	{"ZADD", "s", "NX", "INCR", "1", "a"}, {"ZPOPMIN", "s"}, {"ZPOPMAX", "s", "2"}, {"ZPOPMIN", "s", "1"},
	{"ZPOPMIN", "nope"}, {"ZPOPMIN", "nope", "2"}, {"ZADD", "s", "nan", "x"}, {"ZINCRBY", "s", "x", "a"},
}

// TestDataAsOneRedis: the commands of asOneRedisSequence answer through a
// proxy over three backends the bytes one redis-server answers, in RESP2
// and in RESP3.
func TestDataAsOneRedis(t *testing.T) {
	t.Parallel()
	ref := startRedis(t)
	p := startProxy(t, startCluster(t, 3), "allow_flush = true")
	for _, proto := range []string{"2", "3"} {
		direct, proxy := testkit.Dial(t, ref.Addr()), testkit.Dial(t, p.Addr())
		for _, c := range []*testkit.Conn{direct, proxy} {
			c.SendCmd("HELLO", proto)
			c.ReadRaw()
			c.SendCmd("FLUSHALL")
			c.ReadRaw()
		}
		for _, cmd := range asOneRedisSequence {
			direct.SendCmd(cmd...)
			proxy.SendCmd(cmd...)
			if want, got := string(direct.ReadRaw()), string(proxy.ReadRaw()); got != want {
				t.Errorf("RESP%s %s: proxy answered %q, one Redis %q", proto, strings.Join(cmd, " "), got, want)
			}
		}
	}
}
