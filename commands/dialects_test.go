package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
)

// run is a command and the exact RESP2 reply it must get.
type run struct {
	in   []string
	want string
}

func runAll(t *testing.T, d *Dispatcher, c *Client, steps []run) {
	t.Helper()
	for _, s := range steps {
		if got := do(d, c, s.in...); got != s.want {
			t.Fatalf("%q = %q, want %q", s.in, got, s.want)
		}
	}
}

func TestSetDialect(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"set", "k", "v1", "px", "5000", "nx"}, "+OK\r\n"},
		{[]string{"SET", "k", "v2", "NX", "EX", "5"}, "$-1\r\n"},
		{[]string{"GET", "k"}, "$2\r\nv1\r\n"},
		{[]string{"EXISTS", "k", "nope"}, ":1\r\n"},
		{[]string{"SET", "k", "v2", "PX", "5000", "IFEQ", "wrong"}, "$-1\r\n"},
		{[]string{"SET", "k", "v2", "PX", "5000", "IFEQ", "v1"}, "+OK\r\n"},
		{[]string{"DELEX", "k", "IFEQ", "v1"}, ":0\r\n"},
		{[]string{"DELIFEQ", "k", "v2"}, ":1\r\n"},
		{[]string{"GET", "k"}, "$-1\r\n"},
		{[]string{"PTTL", "k"}, ":-2\r\n"},
		{[]string{"SETNX", "n", "a"}, ":1\r\n"},
		{[]string{"SETNX", "n", "b"}, ":0\r\n"},
		{[]string{"TTL", "n"}, ":-1\r\n"}, // no expiry: kept by the proxy
		{[]string{"PEXPIRE", "n", "9000"}, ":1\r\n"},
		{[]string{"TTL", "n"}, ":9\r\n"}, // an expiry now: no longer kept
		{[]string{"PERSIST", "n"}, ":1\r\n"},
		{[]string{"PTTL", "n"}, ":-1\r\n"},
		{[]string{"PERSIST", "n"}, ":0\r\n"}, // no expiry to remove
		{[]string{"PERSIST", "absent"}, ":0\r\n"},
		{[]string{"PEXPIRE", "absent", "9000"}, ":0\r\n"},
		{[]string{"GETSET", "n", "c"}, "$1\r\na\r\n"},
		{[]string{"SET", "n", "d", "GET"}, "$1\r\nc\r\n"},
		{[]string{"SET", "n", "e"}, "+OK\r\n"}, // unconditional: steals
		{[]string{"GET", "n"}, "$1\r\ne\r\n"},
		{[]string{"PTTL", "n"}, ":-1\r\n"},
		{[]string{"SET", "n", "f", "PX", "5000"}, "+OK\r\n"},
		{[]string{"TTL", "n"}, ":5\r\n"},
		{[]string{"DEL", "n", "absent"}, ":1\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "120000"}, "-ERR ttl 120000 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
		// Huge ttls are refused, not wrapped around into range.
		{[]string{"SET", "k", "v", "NX", "PX", "18446744074710"}, "-ERR ttl 18446744074710 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"SET", "k", "v", "NX", "EX", "9223372036854775807"}, "-ERR invalid expire time in 'set' command\r\n"}, // Redis's own overflow check
		{[]string{"PEXPIRE", "k", "18446744074710"}, ":0\r\n"},                                                          // data's ttl, as one Redis: k is absent
		{[]string{"EXPIRE", "k", "9223372036854775"}, "-ERR invalid expire time in 'expire' command\r\n"},               // overflows from now, as Redis checks
		{[]string{"SET", "k", "v", "NX", "PX", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "100", "EX", "1"}, "-ERR syntax error\r\n"},
		{[]string{"SET", "absent", "v", "XX"}, "$-1\r\n"},
		{[]string{"SET", "k", "v", "BOGUS"}, "-ERR syntax error\r\n"},
		// One Redis takes an empty key or value; the proxy says why it does not.
		{[]string{"SET", "", "v"}, "-ERR invalid argument: empty key: redlock-proxy's locks and plain writes need a key and a value that are not empty\r\n"},
		{[]string{"SET", "k", "", "NX", "PX", "1000"}, "-ERR invalid argument: empty token: redlock-proxy's locks and plain writes need a key and a value that are not empty\r\n"},
		{[]string{"FLUSHDB"}, "-ERR FLUSHDB would delete every lock on every backend: refused by redlock-proxy unless allow_flush = true\r\n"},
	})
	// A SET NX lock is on a quorum of backends, with the client's value.
	do(d, c, "SET", "q", "mine", "NX", "PX", "5000")
	n := 0
	for _, m := range mrs {
		if v, _ := m.Get("q"); v == "mine" {
			n++
		}
	}
	if n < 3 {
		t.Fatalf("SET NX reached %d backends", n)
	}
	// RESP3 nulls.
	c.proto.Store(3)
	runAll(t, d, c, []run{{[]string{"SET", "q", "x", "NX", "PX", "5000"}, "_\r\n"}, {[]string{"GET", "nope"}, "_\r\n"}})
}

func TestStackExchangeTransaction(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
		{[]string{"DISCARD"}, "-ERR DISCARD without MULTI\r\n"},
		{[]string{"SET", "k", "v", "PX", "5000", "NX"}, "+OK\r\n"},
		// LockExtend: compare-and-expire.
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"PEXPIRE", "k", "9000"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n:1\r\n"},
		// LockRelease by another owner: the value read no longer holds.
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"DEL", "k"}, "+QUEUED\r\n"},
	})
	// Between GET and EXEC the lock changes hands.
	other := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	runAll(t, d, other, []run{{[]string{"SET", "k", "w"}, "+OK\r\n"}})
	runAll(t, d, c, []run{
		{[]string{"EXEC"}, "*-1\r\n"},
		{[]string{"GET", "k"}, "$1\r\nw\r\n"},
		// LockRelease that holds.
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$1\r\nw\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"MULTI"}, "-ERR MULTI calls can not be nested\r\n"},
		{[]string{"DEL", "k"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n:1\r\n"},
		{[]string{"EXISTS", "k"}, ":0\r\n"},
		// An option refused outside MULTI is refused when queued, too.
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$-1\r\n"},
		{[]string{"SET", "k", "v2", "NX", "PX", "5000"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$2\r\nv2\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"PEXPIRE", "k", "9000", "GT"}, "-ERR PEXPIRE GT is not supported by redlock-proxy\r\n"},
		{[]string{"PEXPIRE", "k", "120000"}, "-ERR ttl 120000 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$2\r\nv2\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"EXPIRE", "k", "9"}, "+QUEUED\r\n"},
		{[]string{"DEL", "k"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n:1\r\n:1\r\n"},
		// After WATCH, anything else inside MULTI aborts the transaction.
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "k", "x"}, "-" + errTxOnly + "\r\n"},
		{[]string{"DEL", "unwatched"}, "-" + errTxOnly + "\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"UNWATCH"}, "+OK\r\n"},
	})
}

func TestPubSubAccepted(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"SUBSCRIBE", "a", "b"}, "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"},
		{[]string{"GET", "k"}, "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
		{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n"},
		{[]string{"PUBLISH", "a", "m"}, ":0\r\n"},
	})
}

// TestNoKeepTTL: with default_ttl = 0 (KeepTTL 0) a plain write without
// expiry is made without one, as is PERSIST of data, while an acquisition
// without expiry is refused with the reason (conf/doc.go says so).
func TestNoKeepTTL(t *testing.T) {
	logger := redlocktest.Logger(t)
	rl, mrs := redlocktest.New(t, 3, redlock.Options{Logger: logger})
	d := New(Options{
		Leases: lease.New(lease.Options{Locker: rl, Logger: logger}),
		MinTTL: 10 * time.Millisecond, MaxTTL: 60 * time.Second, Logger: logger,
	})
	shutdownAtEnd(t, d)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if r := do(d, c, "SET", "k", "v"); r != "+OK\r\n" {
		t.Fatalf("SET k v: %q", r)
	}
	if ttl := mrs[0].TTL("k"); ttl != 0 {
		t.Errorf("SET k v wrote a ttl of %v, want none", ttl)
	}
	do(d, c, "SET", "p", "v", "PX", "30000")
	if r := do(d, c, "PERSIST", "p"); r != ":1\r\n" {
		t.Errorf("PERSIST of data: %q, want :1", r)
	}
	for _, cmd := range [][]string{{"SETNX", "n", "v"}, {"SET", "n", "v", "NX"}} {
		if r := do(d, c, cmd...); !strings.HasPrefix(r, "-ERR") || !strings.Contains(r, "default_ttl > 0") {
			t.Errorf("%q: %q, want the refusal naming default_ttl", cmd, r)
		}
	}
}
