package commands

import (
	"strings"
	"testing"
)

// TestTransactionWrites: a transaction that writes, without WATCH, runs
// as one script by vote: every command in order on every backend, the
// reply each command's own (an error in place where one failed, as EXEC
// answers), RESP3 shapes as the commands alone answer them; the legacy
// SETNX + EXPIRE lock takes the key with its ttl. A command no script
// can call, a write after WATCH, a read no script can call before a
// write and a call past the script's argument bound abort it.
func TestTransactionWrites(t *testing.T) {
	d, mrs := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	const abort = "-EXECABORT Transaction discarded because of previous errors.\r\n"
	runAll(t, d, c, []run{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "a", "1"}, "+QUEUED\r\n"},
		{[]string{"INCR", "a"}, "+QUEUED\r\n"},
		{[]string{"HSET", "h", "f", "a"}, "+QUEUED\r\n"}, // a value equal to a key
		{[]string{"GET", "a"}, "+QUEUED\r\n"},
		{[]string{"LPUSH", "a", "x"}, "+QUEUED\r\n"},
		{[]string{"PING"}, "+QUEUED\r\n"}, // the proxy's own answer, in its place
		{[]string{"GET", "nokey"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*7\r\n+OK\r\n:2\r\n:1\r\n$1\r\n2\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n+PONG\r\n$-1\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SETNX", "lk", "t1"}, "+QUEUED\r\n"},
		{[]string{"EXPIRE", "lk", "10"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n:1\r\n:1\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SETNX", "lk", "t2"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n:0\r\n"},
		{[]string{"GET", "lk"}, "$2\r\nt1\r\n"},
		// Aborted when queued.
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "b", "1"}, "+QUEUED\r\n"},
		{[]string{"LOCK", "b", "1000"}, "-" + errTxOnly + "\r\n"},
		{[]string{"EXEC"}, abort},
		{[]string{"WATCH", "b"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "b", "1"}, "-" + errTxOnly + "\r\n"},
		{[]string{"EXEC"}, abort},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"DIGEST", "b"}, "+QUEUED\r\n"},
		{[]string{"SET", "b", "1"}, "-ERR redlock-proxy runs a transaction that writes as one script by vote, which cannot call a read queued before it\r\n"},
		{[]string{"EXEC"}, abort},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"RPUSH", "b", "1"}, "+QUEUED\r\n"},
		{[]string{"DIGEST", "b"}, "-ERR redlock-proxy runs a transaction that writes as one script by vote, which cannot call 'digest'\r\n"},
		{[]string{"EXEC"}, abort},
		{[]string{"MULTI"}, "+OK\r\n"},
		{append([]string{"RPUSH", "b"}, strings.Split(strings.Repeat("x ", 200), " ")[:200]...), "-ERR redlock-proxy runs a transaction that writes as one script by vote, whose calls take at most 200 arguments\r\n"},
		{[]string{"EXEC"}, abort},
		{[]string{"EXISTS", "b"}, ":0\r\n"},
	})
	for i, mr := range mrs {
		if v, _ := mr.Get("a"); v != "2" {
			t.Errorf("backend %d: a = %q, want 2", i, v)
		}
		if ttl := mr.TTL("lk"); ttl <= 0 {
			t.Errorf("backend %d: lk has ttl %v, want the 10 s EXPIRE gave it", i, ttl)
		}
	}
	do(d, c, "HELLO", "3")
	runAll(t, d, c, []run{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"ZADD", "z", "1.5", "m"}, "+QUEUED\r\n"},
		{[]string{"ZSCORE", "z", "m"}, "+QUEUED\r\n"},
		{[]string{"HGETALL", "h"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*3\r\n:1\r\n,1.5\r\n%1\r\n$1\r\nf\r\n$1\r\na\r\n"},
	})
}

// TestTransactionBounded: one client's open transaction holds at most
// maxTxQueued commands in the proxy; the next is refused, and EXEC aborts.
func TestTransactionBounded(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	do(d, c, "MULTI")
	for range maxTxQueued {
		if r := do(d, c, "GET", "k"); r != "+QUEUED\r\n" {
			t.Fatalf("GET inside MULTI = %q", r)
		}
	}
	runAll(t, d, c, []run{
		{[]string{"GET", "k"}, "-ERR redlock-proxy queues at most 10000 commands and 16 MiB of arguments in one transaction\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"GET", "k"}, "$-1\r\n"},
	})
}

// TestWatchedTransaction: after WATCH, a transaction that writes runs
// when every watched key was read with GET after WATCH, and its script
// first checks each still holds what was read: the check-and-set of
// Redis's docs runs, and answers null (not run) when another client
// changed a watched key, or made one that was absent. A watched key not
// read aborts a write.
func TestWatchedTransaction(t *testing.T) {
	d, mrs := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	other := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"SET", "n", "5"}, "+OK\r\n"},
		{[]string{"WATCH", "n", "none"}, "+OK\r\n"},
		{[]string{"GET", "n"}, "$1\r\n5\r\n"},
		{[]string{"GET", "none"}, "$-1\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "n", "6"}, "+QUEUED\r\n"},
		{[]string{"SET", "none", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n+OK\r\n+OK\r\n"},
		// Changed by another client between GET and EXEC: not run.
		{[]string{"WATCH", "n"}, "+OK\r\n"},
		{[]string{"GET", "n"}, "$1\r\n6\r\n"},
	})
	runAll(t, d, other, []run{{[]string{"SET", "n", "9"}, "+OK\r\n"}})
	runAll(t, d, c, []run{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "n", "7"}, "+QUEUED\r\n"},
		{[]string{"INCR", "side"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*-1\r\n"},
		{[]string{"GET", "n"}, "$1\r\n9\r\n"},
		{[]string{"EXISTS", "side"}, ":0\r\n"},
		// An absent key read, then made by another client: not run.
		{[]string{"WATCH", "gone"}, "+OK\r\n"},
		{[]string{"GET", "gone"}, "$-1\r\n"},
	})
	runAll(t, d, other, []run{{[]string{"SET", "gone", "y"}, "+OK\r\n"}})
	runAll(t, d, c, []run{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"DEL", "gone", "n"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*-1\r\n"},
		// A watched key not read: a write aborts.
		{[]string{"WATCH", "n", "unread"}, "+OK\r\n"},
		{[]string{"GET", "n"}, "$1\r\n9\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "n", "1"}, "-" + errTxOnly + "\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"GET", "n"}, "$1\r\n9\r\n"},
	})
	for i, mr := range mrs {
		if v, _ := mr.Get("none"); v != "x" {
			t.Errorf("backend %d: none = %q, want x", i, v)
		}
		if v, _ := mr.Get("gone"); v != "y" {
			t.Errorf("backend %d: gone = %q, want y", i, v)
		}
	}
}
