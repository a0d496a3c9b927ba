package tests

import (
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// scriptsAsOneRedis: scripts whose replies, byte for byte in RESP2 and
// RESP3, once differed from one redis-server 7.0's. Each runs twice: as
// it is (a read the proxy answers itself) and after an HLEN (by vote, in
// the run-time wrapper on every backend); one marked "vote:" only by vote
// (docs/compatibility.md, "Limits worth stating").
var scriptsAsOneRedis = []string{
	// redis.error_reply gives a text without a code the code ERR:
	// -boom was answered where Redis sends -ERR boom.
	`return redis.error_reply('boom')`,
	`return redis.error_reply('MYCODE boom')`,
	`return redis.error_reply('')`,
	`return redis.error_reply(1)`,
	`return redis.status_reply(1)`,
	// A number beyond long long: 9223372036854775807 was answered.
	`return 1e100`,
	`return 1/0`,
	// The proxy's own Lua wrote numbers as Go does (0.3333333333333333,
	// 1000000000000000, 0, +Inf, NaN), formatted with Go's fmt and read
	// tonumber('1e2') as nil: Lua 5.1 writes "%.14g" and reads with strtod.
	`return redis.call('get', KEYS[1]) or tostring(1/3) .. ' ' .. 1e15 .. ' ' .. tostring(-0.0) .. ' ' .. tostring(math.huge) .. ' ' .. tostring(0/0)`,
	`return redis.call('get', KEYS[1]) or string.format('%5.1f|%x|%q|%g|%s|%c', 1/3, -1, 'a\nb\0', 1e20, 2^53, 0)`,
	`return redis.call('get', KEYS[1]) or (tonumber('1e2') or 0) + (tonumber(' 0x10 ') or 0) + (tonumber('z', 36) or 0)`,
	`return redis.call('get', KEYS[1]) or table.concat({1/3, 1e15, string.len(1e15)}, ',')`,
	// The wrapper's own names showed in Lua's errors: 'sformat'.
	`vote:return string.format('%d', 'x')`,
	`vote:return string.format()`,
	`vote:return string.rep('x')`,
	`vote:return string.find()`,
	// The body's string and table libraries were writable copies.
	`string.x = 1`,
	`table.insert = nil`,
}

// TestScriptsAsOneRedis: the scripts of scriptsAsOneRedis answer through a
// proxy over three backends the bytes one redis-server answers, in RESP2
// and RESP3 (RESP3 forms built by a script run by vote are not:
// docs/compatibility.md, "Limits worth stating").
func TestScriptsAsOneRedis(t *testing.T) {
	t.Parallel()
	ref := startRedis(t)
	p := startProxy(t, startCluster(t, 3), "")
	for _, proto := range []string{"2", "3"} {
		direct, proxy := testkit.Dial(t, ref.Addr()), testkit.Dial(t, p.Addr())
		for _, c := range []*testkit.Conn{direct, proxy} {
			c.SendCmd("HELLO", proto)
			c.ReadRaw()
		}
		for _, src := range scriptsAsOneRedis {
			runs := []string{src, "redis.call('hlen', KEYS[1]) " + src}
			if body, ok := strings.CutPrefix(src, "vote:"); ok {
				runs = runs[1:]
				runs[0] = "redis.call('hlen', KEYS[1]) " + body
			}
			for _, s := range runs {
				cmd := []string{"EVAL", s, "1", "sa:k"}
				direct.SendCmd(cmd...)
				proxy.SendCmd(cmd...)
				if want, got := string(direct.ReadRaw()), string(proxy.ReadRaw()); got != want {
					t.Errorf("RESP%s EVAL %q: proxy answered %q, one Redis %q", proto, s, got, want)
				}
			}
		}
	}
}
