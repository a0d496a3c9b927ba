package tests

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// Tracking modes on the wire (raw connections): RESP2 with REDIRECT,
// NOLOOP, BCAST with prefixes. Two proxies over five backends; the other
// clients' changes go through the second proxy.

func trackingSetup(t *testing.T) (*proxyProc, *testkit.Conn) {
	t.Helper()
	rs := startCluster(t, 5)
	pa, pb := startProxy(t, rs, ""), startProxy(t, rs, "")
	return pa, testkit.Dial(t, pb.Addr())
}

// do sends a command and checks its reply.
func doWant(t *testing.T, c *testkit.Conn, want any, args ...string) {
	t.Helper()
	if got := c.Do(args...); !reflect.DeepEqual(got, want) {
		t.Fatalf("%q = %#v, want %#v", args, got, want)
	}
}

// expect reads the next reply or push and checks it is want.
func expect(t *testing.T, c *testkit.Conn, want any, what string) {
	t.Helper()
	if got := c.ReadReply(); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: read %#v, want %#v", what, got, want)
	}
}

// expectNothing checks that nothing arrives for a while.
func expectNothing(t *testing.T, c *testkit.Conn, what string) {
	t.Helper()
	if v, err := c.TryReadReply(300 * time.Millisecond); err == nil {
		t.Fatalf("%s: got %#v, want nothing", what, v)
	}
}

func invalidate(keys ...any) testkit.Push { return testkit.Push{"invalidate", keys} }

// TestTrackingRedirectRESP2: a RESP2 client's invalidations go, as Redis
// sends them, to the client it redirects to, subscribed to
// __redis__:invalidate.
func TestTrackingRedirectRESP2(t *testing.T) {
	t.Parallel()
	pa, writer := trackingSetup(t)
	target := testkit.Dial(t, pa.Addr())
	id, _ := target.Do("CLIENT", "ID").(int64)
	doWant(t, target, []any{"subscribe", "__redis__:invalidate", int64(1)}, "SUBSCRIBE", "__redis__:invalidate")
	c := testkit.Dial(t, pa.Addr())
	doWant(t, c, "OK", "CLIENT", "TRACKING", "ON", "REDIRECT", fmt.Sprint(id))
	doWant(t, c, id, "CLIENT", "GETREDIR")
	doWant(t, writer, "OK", "SET", "rk", "v1")
	doWant(t, c, "v1", "GET", "rk")
	doWant(t, writer, "OK", "SET", "rk", "v2")
	expect(t, target, []any{"message", "__redis__:invalidate", []any{"rk"}}, "the redirected invalidation")
	expectNothing(t, target, "after the invalidation")
	expectNothing(t, c, "on the tracking client itself")
}

// TestTrackingNoLoop: without NOLOOP a client is told of its own write,
// as Redis tells it; with NOLOOP it is not, and still of others' writes.
func TestTrackingNoLoop(t *testing.T) {
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
		key := fmt.Sprintf("nl-%v", noloop)
		doWant(t, c, nil, "GET", key)
		doWant(t, c, "OK", "SET", key, "own")
		if noloop {
			expectNothing(t, c, "NOLOOP: its own write")
		} else {
			expect(t, c, invalidate(key), "its own write")
		}
		doWant(t, c, "own", "GET", key)
		doWant(t, writer, "OK", "SET", key, "theirs")
		expect(t, c, invalidate(key), "another client's write")
		expectNothing(t, c, "after the invalidation")
	}
}

// TestTrackingNoLoopScript: a NOLOOP client's script that reads its key
// and may write it (rueidislock's lock attempt: SET NX, then GET) leaves
// the key tracked whether it wrote or found it held, as on Redis: the
// holder's release wakes the client that found it held; the client is
// not told of its own change of the ttl alone.
func TestTrackingNoLoopScript(t *testing.T) {
	t.Parallel()
	pa, writer := trackingSetup(t)
	const attempt = "redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]); return redis.call('GET', KEYS[1])"
	const extend = "redis.call('PEXPIRE', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])"
	c := testkit.Dial(t, pa.Addr())
	c.Do("HELLO", "3")
	doWant(t, c, "OK", "CLIENT", "TRACKING", "ON", "OPTOUT", "NOLOOP")
	doWant(t, writer, "OK", "SET", "lk", "holder", "PX", "60000")
	doWant(t, c, "holder", "EVAL", attempt, "1", "lk", "waiter", "60000")
	expectNothing(t, c, "an attempt that found the key held")
	doWant(t, writer, int64(1), "DEL", "lk")
	expect(t, c, invalidate("lk"), "the holder's release")
	doWant(t, c, "waiter", "EVAL", attempt, "1", "lk", "waiter", "60000")
	expect(t, c, invalidate("lk"), "its own change of the value (the proxy cannot tell it from another's)")
	doWant(t, c, "waiter", "EVAL", extend, "1", "lk", "30000")
	expectNothing(t, c, "its own change of the ttl")
	doWant(t, writer, "OK", "SET", "lk", "thief")
	expect(t, c, invalidate("lk"), "another client's change after its own scripts")
}

// TestTrackingBcast: BCAST clients are told of every change of a key
// under their prefixes, read or not, once per change; a second client's
// wider prefix re-registers the backends without a gap.
func TestTrackingBcast(t *testing.T) {
	t.Parallel()
	pa, writer := trackingSetup(t)
	narrow := testkit.Dial(t, pa.Addr())
	narrow.Do("HELLO", "3")
	doWant(t, narrow, "OK", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "bc:", "PREFIX", "other:")
	doWant(t, writer, "OK", "SET", "bc:1", "x")
	expect(t, narrow, invalidate("bc:1"), "a key under the prefix")
	doWant(t, writer, "OK", "SET", "nope:1", "x")
	expectNothing(t, narrow, "a key under no prefix")

	wide := testkit.Dial(t, pa.Addr())
	wide.Do("HELLO", "3")
	doWant(t, wide, "OK", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b")
	doWant(t, writer, "OK", "SET", "bx", "x")
	expect(t, wide, invalidate("bx"), "the wide prefix")
	doWant(t, writer, "OK", "SET", "bc:2", "x")
	expect(t, narrow, invalidate("bc:2"), "the narrow prefix, after the re-registration")
	expect(t, wide, invalidate("bc:2"), "the wide prefix covers it too")
	expectNothing(t, narrow, "once per change")
	expectNothing(t, wide, "once per change")
	doWant(t, writer, "OK", "SET", "other:1", "x")
	expect(t, narrow, invalidate("other:1"), "the narrow client's second prefix")
	expectNothing(t, wide, "a key under none of its prefixes")
}

// TestTrackingBackendsLost: a tracked key stays tracked while enough
// backends can still report its changes (more than N−quorum); once too
// few can, it is invalidated, and a read then is invalidated right after
// its reply, so nothing is cached that no backend would invalidate.
func TestTrackingBackendsLost(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	c := testkit.Dial(t, p.Addr())
	c.Do("HELLO", "3")
	doWant(t, c, "OK", "CLIENT", "TRACKING", "ON")
	doWant(t, c, nil, "GET", "lost")
	rs[0].Kill()
	expectNothing(t, c, "one backend of five lost")
	rs[1].Kill()
	expectNothing(t, c, "two backends of five lost")
	rs[2].Kill()
	expect(t, c, invalidate("lost"), "three backends of five lost")
	c.SendCmd("GET", "lost")
	if v := c.ReadReply(); v != nil {
		if _, isErr := v.(testkit.Error); !isErr { // no quorum to read from
			t.Fatalf("GET = %#v", v)
		}
	}
	expect(t, c, invalidate("lost"), "a read no backend covers")
}
