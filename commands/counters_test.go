package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestCounters: INCR and INCRBY answer a count that only grows, even over
// backends left behind; errors are Redis's; DECR and negative increments
// are refused with the reason; and with two of five backends, no quorum.
func TestCounters(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"INCR", "fence"}, ":1\r\n"},
		{[]string{"incr", "fence"}, ":2\r\n"},
		{[]string{"INCRBY", "fence", "10"}, ":12\r\n"},
		{[]string{"INCRBY", "fence", "x"}, "-" + string(errNotInteger) + "\r\n"},
		{[]string{"INCRBY", "fence", "0"}, "-" + string(errIncrDown) + "\r\n"},
		{[]string{"INCRBY", "fence", "-3"}, "-" + string(errIncrDown) + "\r\n"},
		{[]string{"DECR", "fence"}, "-" + string(errIncrDown) + "\r\n"},
		{[]string{"DECRBY", "fence", "1"}, "-" + string(errIncrDown) + "\r\n"},
		// A number Redis does not read is its error, before the refusal.
		{[]string{"DECRBY", "fence", "x"}, "-" + string(errNotInteger) + "\r\n"},
		{[]string{"INCRBY", "fence", "+1"}, "-" + string(errNotInteger) + "\r\n"},
		{[]string{"INCRBY", "fence", "01"}, "-" + string(errNotInteger) + "\r\n"},
		{[]string{"INCRBY", "fence", " 1"}, "-" + string(errNotInteger) + "\r\n"},
		{[]string{"INCR"}, "-ERR wrong number of arguments for 'incr' command\r\n"},
		{[]string{"INCR", redlock.FenceKey}, "-" + string(errReservedKey) + "\r\n"},
		{[]string{"SET", "word", "abc"}, "+OK\r\n"},
		{[]string{"INCR", "word"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"EVAL", "redis.call('HSET', KEYS[1], 'f', 'v')", "1", "h"}, "$-1\r\n"},
		{[]string{"INCR", "h"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
	})

	// Three backends (a quorum) lost their copies: the count still grows.
	for _, m := range mrs[:3] {
		m.Del("fence")
	}
	runAll(t, d, c, []run{{[]string{"INCR", "fence"}, ":13\r\n"}})
	// The write-back answers at a quorum; the others follow.
	testkit.Eventually(t, 5*time.Second, "every backend raised to 13", func() bool {
		for _, m := range mrs {
			if v, _ := m.Get("fence"); v != "13" {
				return false
			}
		}
		return true
	})
	mrs[0].Close()
	mrs[1].Close()
	mrs[2].Close()
	if got := do(d, c, "INCR", "fence"); !strings.HasPrefix(got, "-NOQUORUM") {
		t.Fatalf("INCR with two of five backends = %q, want -NOQUORUM", got)
	}
}

// TestOtherTypes: a key of another type than a string (a library's hash
// lock) reads as on one Redis: TYPE names it, PTTL and TTL give its ttl,
// EXISTS counts it, GET is WRONGTYPE, LOCKINFO finds no lock, PERSIST is
// refused with the reason.
func TestOtherTypes(t *testing.T) {
	d, _ := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"EVAL", "redis.call('HSET', KEYS[1], 'f', 'v') return redis.call('PEXPIRE', KEYS[1], 20000)", "1", "h"}, ":1\r\n"},
		{[]string{"TYPE", "h"}, "+hash\r\n"},
		{[]string{"EXISTS", "h"}, ":1\r\n"},
		{[]string{"TTL", "h"}, ":20\r\n"},
		{[]string{"GET", "h"}, "-" + string(errWrongType) + "\r\n"},
		{[]string{"LOCKINFO", "h"}, "$-1\r\n"},
		{[]string{"SET", "s", "v"}, "+OK\r\n"},
		{[]string{"TYPE", "s"}, "+string\r\n"},
		{[]string{"TYPE", "nothing"}, "+none\r\n"},
		{[]string{"TYPE"}, "-ERR wrong number of arguments for 'type' command\r\n"},
	})
	if got := do(d, c, "PTTL", "h"); !strings.HasPrefix(got, ":1") && !strings.HasPrefix(got, ":2") {
		t.Fatalf("PTTL of a hash with a 20 s ttl = %q", got)
	}
	// PERSIST of a hash, as on one Redis: 1, then no expiry (held).
	runAll(t, d, c, []run{
		{[]string{"PERSIST", "h"}, ":1\r\n"},
		{[]string{"TTL", "h"}, ":-1\r\n"},
		{[]string{"PERSIST", "h"}, ":0\r\n"},
		{[]string{"TYPE", "h"}, "+hash\r\n"},
	})
}
