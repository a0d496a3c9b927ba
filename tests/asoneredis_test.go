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
