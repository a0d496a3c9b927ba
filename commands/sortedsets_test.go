package commands

import (
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// TestSortedSetsByVote: a semaphore of our own (a holder set scored by the
// client's clock, acquired by a script run by vote) released with a bare
// ZREM and counted with ZCARD, with five, three and two of five backends
// answering, and with one backend behind.
func TestSortedSetsByVote(t *testing.T) {
	// limit, id, ttl ms, now ms: 1 when admitted, else 0.
	const acquire = `redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[4] - ARGV[3])
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('zadd', KEYS[1], ARGV[4], ARGV[2])
redis.call('pexpire', KEYS[1], ARGV[3])
return 1`
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"ZCARD", "sem"}, ":0\r\n"},
		{[]string{"EVAL", acquire, "1", "sem", "2", "a", "10000", "1000"}, ":1\r\n"},
		{[]string{"EVAL", acquire, "1", "sem", "2", "b", "10000", "1001"}, ":1\r\n"},
		{[]string{"EVAL", acquire, "1", "sem", "2", "c", "10000", "1002"}, ":0\r\n"},
		{[]string{"ZCARD", "sem"}, ":2\r\n"},
		{[]string{"ZREM", "sem", "a"}, ":1\r\n"},
		{[]string{"ZREM", "sem", "a", "nobody"}, ":0\r\n"},
		{[]string{"EVAL", acquire, "1", "sem", "2", "c", "10000", "1003"}, ":1\r\n"},
		{[]string{"ZREM", "sem", "b", "c"}, ":2\r\n"},
		{[]string{"ZCARD", "sem"}, ":0\r\n"},
		{[]string{"SET", "str", "v", "NX", "PX", "10000"}, "+OK\r\n"},
		{[]string{"ZREM", "str", "m"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{[]string{"ZREM", "sem"}, "-ERR wrong number of arguments for 'zrem' command\r\n"},
		{[]string{"ZCARD", redlock.FenceKey}, "-" + string(errReservedKey) + "\r\n"},
	})
	for _, m := range mrs {
		if m.Exists("sem") {
			t.Fatalf("backend %s still has the set after the last ZREM", m.Addr())
		}
	}

	// One backend missed the holder: the quorum's count and removal win.
	runAll(t, d, c, []run{{[]string{"EVAL", acquire, "1", "s2", "3", "x", "10000", "2000"}, ":1\r\n"}})
	if _, err := mrs[0].ZRem("s2", "x"); err != nil {
		t.Fatal(err)
	}
	runAll(t, d, c, []run{
		{[]string{"ZCARD", "s2"}, ":1\r\n"},
		{[]string{"ZREM", "s2", "x"}, ":1\r\n"},
		{[]string{"ZCARD", "s2"}, ":0\r\n"},
	})

	// Three of five answer: still a quorum; two: none.
	runAll(t, d, c, []run{{[]string{"EVAL", acquire, "1", "s3", "3", "y", "10000", "3000"}, ":1\r\n"}})
	mrs[1].Close()
	mrs[3].Close()
	runAll(t, d, c, []run{{[]string{"ZREM", "s3", "y"}, ":1\r\n"}})
	mrs[4].Close()
	if got := do(d, c, "ZCARD", "s3"); !strings.HasPrefix(got, "-NOQUORUM") {
		t.Fatalf("ZCARD with two of five backends = %q, want -NOQUORUM", got)
	}
}
