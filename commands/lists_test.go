package commands

import (
	"strconv"
	"testing"
	"time"
)

// TestPopCount: LPOP/RPOP with a count answer as Redis 7 does (replies
// taken from redis-server 7.0.15): an array of the elements popped, empty
// for count 0 on a held key, the null array for a missing key, and the
// count checked before the key. The one-element form is unchanged.
func TestPopCount(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	const outOfRange = "-ERR value is out of range, must be positive\r\n"
	runAll(t, d, c, []run{
		{[]string{"RPUSH", "l", "a", "b", "c"}, ":3\r\n"},
		{[]string{"LPOP", "l", "2"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"RPOP", "l", "5"}, "*1\r\n$1\r\nc\r\n"},
		{[]string{"LPOP", "l", "2"}, "*-1\r\n"},
		{[]string{"LPOP", "l", "0"}, "*-1\r\n"},
		{[]string{"RPUSH", "l", "a", "b", "c"}, ":3\r\n"},
		{[]string{"RPOP", "l", "2"}, "*2\r\n$1\r\nc\r\n$1\r\nb\r\n"},
		{[]string{"LPOP", "l", "0"}, "*0\r\n"},
		{[]string{"LLEN", "l"}, ":1\r\n"},
		{[]string{"LPOP", "l", "-1"}, outOfRange},
		{[]string{"LPOP", "l", "x"}, outOfRange},
		{[]string{"LPOP", "l", "1.5"}, outOfRange},
		{[]string{"LPOP", "l", "+1"}, outOfRange},
		{[]string{"LPOP", "l", "01"}, outOfRange},
		{[]string{"LPOP", "l", "-0"}, outOfRange},
		{[]string{"LPOP", "l", "9223372036854775808"}, outOfRange},
		{[]string{"LPOP", "l", "1", "2"}, "-ERR wrong number of arguments for 'lpop' command\r\n"},
		{[]string{"rpop", "l", "1", "2"}, "-ERR wrong number of arguments for 'rpop' command\r\n"},
		{[]string{"LPOP", "l", "9223372036854775807"}, "*1\r\n$1\r\na\r\n"},
		{[]string{"LPOP", "l"}, "$-1\r\n"},
		{[]string{"SET", "s", "v"}, "+OK\r\n"},
		{[]string{"LPOP", "s", "2"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{[]string{"LPOP", "s", "-1"}, outOfRange},
	})
	// A backend outvoted at the second place gets back what it popped
	// past the first; count 1 answers Pop's element, and the backend's q,
	// outvoted again, goes back in front of its z.
	for i, mr := range mrs {
		l := []string{"x", "y", "z"}
		if i == 4 {
			l = []string{"x", "q", "z"}
		}
		if _, err := mr.Push("v", l...); err != nil {
			t.Fatal(err)
		}
	}
	runAll(t, d, c, []run{
		{[]string{"LPOP", "v", "2"}, "*2\r\n$1\r\nx\r\n$1\r\ny\r\n"},
		{[]string{"LPOP", "v", "1"}, "*1\r\n$1\r\nz\r\n"},
	})
	if l, _ := mrs[4].List("v"); len(l) != 2 || l[0] != "q" || l[1] != "z" {
		t.Errorf("the outvoted backend holds %q, want [q z]", l)
	}
	// A string on most backends (a write not yet on the others, as when
	// SET answered at its quorum): WRONGTYPE is most backends' answer, and
	// what the others popped goes back.
	for i, mr := range mrs {
		if i < 3 {
			mr.Set("w", "v")
		} else if _, err := mr.Push("w", "a", "b"); err != nil {
			t.Fatal(err)
		}
	}
	runAll(t, d, c, []run{
		{[]string{"LPOP", "w", "2"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{[]string{"RPOP", "w"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
	})
	if l, _ := mrs[4].List("w"); len(l) != 2 || l[0] != "a" || l[1] != "b" {
		t.Errorf("a backend outvoted by WRONGTYPE holds %q, want [a b]", l)
	}
	do(d, c, "HELLO", "3")
	runAll(t, d, c, []run{
		{[]string{"LPOP", "nokey", "2"}, "_\r\n"},
		{[]string{"RPUSH", "l", "a"}, ":1\r\n"},
		{[]string{"LPOP", "l", "0"}, "*0\r\n"},
		{[]string{"RPOP", "l", "1"}, "*1\r\n$1\r\na\r\n"},
		{[]string{"RPOP", "l"}, "_\r\n"},
	})
}

// TestNullArrays: LMPOP's and ZMPOP's nil, and GEOPOS's for each missing
// member, are the null array (*-1 in RESP2), as Redis sends them, though
// each runs by vote as a script, where any nil reads as $-1.
func TestNullArrays(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"LMPOP", "1", "nol", "LEFT"}, "*-1\r\n"},
		{[]string{"ZMPOP", "1", "noz", "MIN"}, "*-1\r\n"},
		{[]string{"GEOADD", "g", "13.361389", "38.115556", "a"}, ":1\r\n"},
		{[]string{"GEOPOS", "g", "nope", "nope"}, "*2\r\n*-1\r\n*-1\r\n"},
		{[]string{"GEODIST", "g", "a", "nope"}, "$-1\r\n"},
	})
	do(d, c, "HELLO", "3")
	runAll(t, d, c, []run{
		{[]string{"LMPOP", "1", "nol", "LEFT"}, "_\r\n"},
		{[]string{"GEOPOS", "g", "nope"}, "*1\r\n_\r\n"},
	})
}

// TestBlockingPopReplies: a blocking pop that times out answers the null
// array, BLMOVE too (redis-server 7.0.15 answers BLMOVE's timeout *-1,
// as BLPOP's), and a key the backends hold as another type answers
// WRONGTYPE, as on one Redis, not NOQUORUM; BRPOPLPUSH is served as the
// BLMOVE it names.
func TestBlockingPopReplies(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	const wrongType = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	runAll(t, d, c, []run{
		{[]string{"BLPOP", "none", "0.01"}, "*-1\r\n"},
		{[]string{"BLMOVE", "none", "dst", "LEFT", "RIGHT", "0.01"}, "*-1\r\n"},
		{[]string{"SET", "s", "v"}, "+OK\r\n"},
		{[]string{"BLPOP", "s", "0.01"}, wrongType},
		{[]string{"BRPOP", "s", "0"}, wrongType},
		{[]string{"BLMOVE", "s", "dst", "LEFT", "RIGHT", "0.01"}, wrongType},
		// BRPOPLPUSH is BLMOVE source destination RIGHT LEFT.
		{[]string{"BRPOPLPUSH", "none", "dst", "0.01"}, "*-1\r\n"},
		{[]string{"BRPOPLPUSH", "s", "dst", "0.01"}, wrongType},
		{[]string{"BRPOPLPUSH", "none", "dst", "x"}, "-ERR timeout is not a float or out of range\r\n"},
		{[]string{"BRPOPLPUSH", "none", "dst"}, "-ERR wrong number of arguments for 'brpoplpush' command\r\n"},
		{[]string{"RPUSH", "src", "a", "b"}, ":2\r\n"},
		{[]string{"RPUSH", "dst", "c"}, ":1\r\n"},
		{[]string{"BRPOPLPUSH", "src", "dst", "1"}, "$1\r\nb\r\n"},
		{[]string{"LRANGE", "dst", "0", "-1"}, "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"},
	})
}

// TestClientUnblock: CLIENT UNBLOCK id ends another client's blocking pop
// as redis-server 7.0.15 does: with the pop's timeout reply (TIMEOUT, the
// default) or -UNBLOCKED (ERROR), answering 1; 0 for a client that is not
// blocked or does not exist; a reason other than TIMEOUT or ERROR is
// refused before the id is read.
func TestClientUnblock(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	waiter := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	other := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	id := strconv.FormatInt(waiter.ID, 10)
	runAll(t, d, other, []run{
		{[]string{"CLIENT", "UNBLOCK", id}, ":0\r\n"},
		{[]string{"CLIENT", "UNBLOCK", "999999"}, ":0\r\n"},
		{[]string{"CLIENT", "UNBLOCK", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"CLIENT", "UNBLOCK", "x", "FOO"}, "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"},
		{[]string{"CLIENT", "UNBLOCK"}, "-ERR wrong number of arguments for 'client|unblock' command\r\n"},
	})
	for _, tc := range []struct{ reason, want string }{
		{"", "*-1\r\n"},
		{"TIMEOUT", "*-1\r\n"},
		{"ERROR", "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"},
	} {
		for _, cmd := range [][]string{{"BLPOP", "none", "0"}, {"BLMOVE", "none", "dst", "LEFT", "RIGHT", "0"}} {
			got := make(chan string, 1)
			go func() { got <- do(d, waiter, cmd...) }()
			unblock := []string{"CLIENT", "UNBLOCK", id}
			if tc.reason != "" {
				unblock = append(unblock, tc.reason)
			}
			deadline := time.Now().Add(10 * time.Second)
			for do(d, other, unblock...) != ":1\r\n" {
				if time.Now().After(deadline) {
					t.Fatalf("%q: CLIENT UNBLOCK never found the client blocked", cmd)
				}
				time.Sleep(5 * time.Millisecond)
			}
			select {
			case r := <-got:
				if r != tc.want {
					t.Fatalf("%q unblocked with %q = %q, want %q", cmd, tc.reason, r, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%q still blocked after CLIENT UNBLOCK %s", cmd, tc.reason)
			}
			if r := do(d, other, unblock...); r != ":0\r\n" {
				t.Fatalf("CLIENT UNBLOCK after the pop ended = %q, want :0", r)
			}
		}
	}
}
