package commands

import (
	"os"
	"regexp"
	"strings"
	"testing"
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
		{[]string{"SET", "k", "v", "NX", "EX", "9223372036854775807"}, "-ERR ttl 9223372036854775807 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"PEXPIRE", "k", "18446744074710"}, "-ERR ttl 18446744074710 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"EXPIRE", "k", "9223372036854775"}, "-ERR ttl 9223372036854775000 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"EVALSHA", "b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79", "1", "k", "tok", "288230376151712504"}, "-ERR ttl 288230376151712504 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "100", "EX", "1"}, "-ERR syntax error\r\n"},
		{[]string{"SET", "k", "v", "XX"}, "-ERR SET XX is not supported by redlock-proxy\r\n"},
		{[]string{"SET", "k", "v", "BOGUS"}, "-ERR syntax error\r\n"},
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

func TestScripts(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"EVALSHA", "0000000000000000000000000000000000000000", "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"EVAL", "return 1", "0"}, "-ERR redlock-proxy runs only the lock scripts of known libraries (redsync, redis-py Lock, node-redlock, pottery, aioredlock, redlock-rb, RedLock.net, redlock-php); this script (sha1 e0e1f9fabfc9d4800c877a703b823ac0578ff8db) is not one of them: see docs/compatibility.md\r\n"},
		{[]string{"SCRIPT", "LOAD", "return 1"}, "-ERR redlock-proxy runs only the lock scripts of known libraries (redsync, redis-py Lock, node-redlock, pottery, aioredlock, redlock-rb, RedLock.net, redlock-php); this script (sha1 e0e1f9fabfc9d4800c877a703b823ac0578ff8db) is not one of them: see docs/compatibility.md\r\n"},
		{[]string{"SCRIPT", "EXISTS", "e950836ed1e694540c503ef9972b8de518044d3b", "0000"}, "*2\r\n:1\r\n:0\r\n"},
		{[]string{"SCRIPT", "FLUSH"}, "+OK\r\n"},
		{[]string{"SCRIPT", "BOGUS"}, "-ERR unknown subcommand 'BOGUS'. Try SCRIPT HELP.\r\n"},
		// redsync release: 1 released, 0 another owner, -1 absent.
		{[]string{"SET", "r", "tok", "NX", "PX", "5000"}, "+OK\r\n"},
		{[]string{"EVALSHA", "e950836ed1e694540c503ef9972b8de518044d3b", "1", "r", "other"}, ":0\r\n"},
		{[]string{"evalsha", "E950836ED1E694540C503EF9972B8DE518044D3B", "1", "r", "tok"}, ":1\r\n"},
		{[]string{"EVALSHA", "e950836ed1e694540c503ef9972b8de518044d3b", "1", "r", "tok"}, ":-1\r\n"},
		{[]string{"EVALSHA", "e950836ed1e694540c503ef9972b8de518044d3b", "2", "r"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		{[]string{"EVALSHA", "e950836ed1e694540c503ef9972b8de518044d3b", "-1"}, "-ERR Number of keys can't be negative\r\n"},
		{[]string{"EVALSHA", "e950836ed1e694540c503ef9972b8de518044d3b", "1", "r"}, "-ERR the redsync release script needs 1 keys and 1 arguments\r\n"},
		// node-redlock: multi-resource, all-or-nothing.
		{[]string{"EVALSHA", "e5a322e2634ef59a516e8ea150cb085afafee684", "2", "a", "b", "v", "5000"}, ":2\r\n"},
		{[]string{"EVALSHA", "e5a322e2634ef59a516e8ea150cb085afafee684", "2", "b", "c", "w", "5000"}, ":0\r\n"},
		{[]string{"EXISTS", "c"}, ":0\r\n"},
		{[]string{"EVALSHA", "ce46f80993d5dac20dd066eb301a4e37994bdbed", "2", "a", "b", "v", "9000"}, ":2\r\n"},
		{[]string{"EVALSHA", "0f0f23b9048b36752b5be114f357ba083449f908", "2", "a", "b", "v"}, ":2\r\n"},
		// redis-py extend (A3 "1" replaces the ttl) and reacquire.
		{[]string{"SET", "p", "t", "NX", "PX", "5000"}, "+OK\r\n"},
		{[]string{"EVALSHA", "a4e8783852e6b949f9ef3a97212805108459a890", "1", "p", "t", "7000", "1"}, ":1\r\n"},
		{[]string{"EVALSHA", "1cac51482acf5858da00f6d685d68f886cd6b6b2", "1", "p", "x", "7000"}, ":0\r\n"},
		// aioredlock answers failures with the error ERROR.
		{[]string{"EVALSHA", "c75a9bf1538efcdb1f383acc3e273c5089d57e58", "1", "p", "x", "7000"}, "-ERROR\r\n"},
		// RedLock.net extend: -1 when another owner holds it.
		{[]string{"EVALSHA", "9f614a785a5f9ae8c6396c6b4bf94d2087342603", "1", "p", "x", "7000"}, ":-1\r\n"},
		{[]string{"EVALSHA", "9f614a785a5f9ae8c6396c6b4bf94d2087342603", "1", "p", "t", "7000"}, ":1\r\n"},
		// redlock-rb's read: [value, pttl].
		{[]string{"EVALSHA", "78d2ca48a6dc9ef6892059792a3a0c5237733d64", "1", "nope"}, "*2\r\n$-1\r\n:-2\r\n"},
	})
}

func TestFingerprintNormalisesWhitespace(t *testing.T) {
	if fingerprint([]byte("\r\n a  b\n\tc \n")) != sha1Hex([]byte("a b c")) {
		t.Fatal("fingerprint does not normalise white space")
	}
	for _, s := range catalog {
		for _, sha := range s.sha1s {
			if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(sha) {
				t.Errorf("%s %s: bad sha1 %q", s.library, s.role, sha)
			}
		}
		if s.run == nil || s.minKeys < 1 {
			t.Errorf("%s %s: incomplete row", s.library, s.role)
		}
	}
}

// TestScriptRecognisedByFingerprint reads redis-py's own release script
// (Debian's python3-redis), reindents it, and checks the proxy still
// recognises it, then answers EVALSHA of the reindented text's SHA1.
func TestScriptRecognisedByFingerprint(t *testing.T) {
	src, err := os.ReadFile("/usr/lib/python3/dist-packages/redis/lock.py")
	if err != nil {
		t.Skip("python3-redis is not installed (make test installs it)")
	}
	m := regexp.MustCompile(`(?s)LUA_RELEASE_SCRIPT = """(.*?)"""`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no release script in redis-py's lock.py")
	}
	if sha1Hex(m[1]) != "c3f8721cbb97f72bc19e972846bd7aaf91901658" {
		t.Fatalf("redis-py's release script has sha1 %s", sha1Hex(m[1]))
	}
	reindented := strings.ReplaceAll(string(m[1]), "\n", "\r\n\t")
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	sha := sha1Hex([]byte(reindented))
	runAll(t, d, c, []run{
		{[]string{"EVALSHA", sha, "1", "k", "v"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "5000"}, "+OK\r\n"},
		{[]string{"EVAL", reindented, "1", "k", "v"}, ":1\r\n"},
		{[]string{"SCRIPT", "LOAD", reindented}, "$40\r\n" + sha + "\r\n"},
		{[]string{"EVALSHA", sha, "1", "k", "v"}, ":0\r\n"},
	})
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
		// Anything else inside MULTI aborts the transaction.
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
