package commands

import (
	"strconv"
	"testing"
	"time"
)

func TestClientTrackingReplies(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	other := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	otherID := strconv.FormatInt(other.ID, 10)
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "TRACKINGINFO"}, "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"},
		{[]string{"CLIENT", "GETREDIR"}, ":-1\r\n"},
		{[]string{"CLIENT", "CACHING", "YES"}, "-" + string(errCachingMode) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "MAYBE"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"}, "-" + string(errOptInOut) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"}, "-" + string(errBcastOpt) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "PREFIX", "a"}, "-" + string(errPrefixBcast) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "REDIRECT", "999999"}, "-" + string(errRedirectGone) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab"}, "-ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap.\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN", "REDIRECT", otherID}, "+OK\r\n"},
		{[]string{"CLIENT", "GETREDIR"}, ":" + otherID + "\r\n"},
		{[]string{"CLIENT", "CACHING", "NO"}, "-" + string(errCachingNo) + "\r\n"},
		{[]string{"CLIENT", "CACHING", "YES"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, "*6\r\n$5\r\nflags\r\n*3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n$8\r\nredirect\r\n:" + otherID + "\r\n$8\r\nprefixes\r\n*0\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTOUT"}, "-" + string(errSwitchOpt) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "BCAST"}, "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"},
		{[]string{"CLIENT", "TRACKING", "OFF"}, "+OK\r\n"},
		{[]string{"CLIENT", "GETREDIR"}, ":-1\r\n"},
	})
	do(d, c, "HELLO", "3")
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "NOLOOP"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\nbcast\r\n$6\r\nnoloop\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*1\r\n$1\r\na\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"RESET"}, "+RESET\r\n"},
		{[]string{"CLIENT", "GETREDIR"}, ":-1\r\n"},
	})
}

// TestTrackingBrokenRedirect: once an invalidation finds the client it
// redirects to gone, CLIENT TRACKINGINFO shows the flag broken_redirect,
// in RESP2 too (nothing is pushed to a RESP2 client), until tracking is
// turned on again, as on redis-server 7.0.15.
func TestTrackingBrokenRedirect(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	other := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	otherID := strconv.FormatInt(other.ID, 10)
	info := func(flags string) string {
		return "*6\r\n$5\r\nflags\r\n" + flags + "$8\r\nredirect\r\n:" + otherID + "\r\n$8\r\nprefixes\r\n*0\r\n"
	}
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "TRACKING", "ON", "REDIRECT", otherID}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, info("*1\r\n$2\r\non\r\n")},
	})
	d.CloseClient(other)
	// The backends (miniredis) cannot track: the read is invalidated
	// right after its reply, and that invalidation finds no client.
	runAll(t, d, c, []run{{[]string{"GET", "k"}, "$-1\r\n"}})
	deadline := time.Now().Add(10 * time.Second)
	for do(d, c, "CLIENT", "TRACKINGINFO") != info("*2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n") {
		if time.Now().After(deadline) {
			t.Fatalf("CLIENT TRACKINGINFO = %q, want broken_redirect", do(d, c, "CLIENT", "TRACKINGINFO"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "GETREDIR"}, ":" + otherID + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "REDIRECT", "0"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, "*6\r\n$5\r\nflags\r\n*1\r\n$2\r\non\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"},
	})
}

// TestTrackingUncovered: backends that cannot track (miniredis) cover no
// read, so a tracked read is invalidated right after its reply, and
// nothing stale is ever cached. OPTIN tracks only after CLIENT CACHING YES.
func TestTrackingUncovered(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c, got := hooked(d)
	do(d, c, "HELLO", "3")
	runAll(t, d, c, []run{
		{[]string{"SET", "k", "v"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"},
	})
	got.want(t, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n")
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "TRACKING", "OFF"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"},
	})
	got.want(t)
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "CACHING", "YES"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"}, // the flag applied to one command
	})
	got.want(t, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n")
}

// TestTrackingRedirect: a RESP2 client's invalidations go to the client
// it redirects to, as messages on __redis__:invalidate.
func TestTrackingRedirect(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	target, got := hooked(d)
	c := d.NewClient("127.0.0.1:5", "127.0.0.1:2")
	do(d, target, "SUBSCRIBE", "__redis__:invalidate")
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "TRACKING", "ON", "REDIRECT", strconv.FormatInt(target.ID, 10)}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$-1\r\n"},
	})
	got.want(t, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n")
}

// TestTransactionReads: rueidis DoCache's transaction, and reads queued
// among the StackExchange lock transaction's commands.
func TestTransactionReads(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c, got := hooked(d)
	do(d, c, "HELLO", "3")
	runAll(t, d, c, []run{
		{[]string{"SET", "k", "v", "PX", "30000"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN"}, "+OK\r\n"},
		{[]string{"CLIENT", "CACHING", "YES"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"PTTL", "k"}, "+QUEUED\r\n"},
		{[]string{"GET", "k"}, "+QUEUED\r\n"},
		{[]string{"EXISTS", "k", "nope"}, "+QUEUED\r\n"},
	})
	r := d.Do(t.Context(), c, args("EXEC"))
	a, ok := r.(Array)
	if !ok || len(a) != 3 || a[1] != BulkString("v") || a[2] != Int(1) {
		t.Fatalf("EXEC = %#v", r)
	}
	if ms, _ := a[0].(Int); ms <= 0 || ms > 30000 {
		t.Fatalf("PTTL in EXEC = %v", a[0])
	}
	// Not covered by the backends (miniredis): invalidated at once.
	got.want(t, ">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\nk\r\n$4\r\nnope\r\n")
	runAll(t, d, c, []run{
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "+QUEUED\r\n"},
		{[]string{"SET", "k", "x"}, "-" + errTxOnly + "\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"TTL", "k"}, "+QUEUED\r\n"},
		{[]string{"DEL", "k"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n:30\r\n:1\r\n"},
	})
	// A transaction that writes tracks its reads too (here, not covered
	// by the backends, invalidated at once), not the keys it writes.
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "CACHING", "YES"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"GET", "r"}, "+QUEUED\r\n"},
		{[]string{"SET", "w", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n_\r\n+OK\r\n"},
	})
	got.want(t, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nr\r\n")
}

func TestLists(t *testing.T) {
	d, mrs := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runAll(t, d, c, []run{
		{[]string{"LPUSH", "l", "a", "b"}, ":2\r\n"},
		{[]string{"RPUSH", "l", "c"}, ":3\r\n"},
		{[]string{"LLEN", "l"}, ":3\r\n"},
		{[]string{"LPOP", "l"}, "$1\r\nb\r\n"},
		{[]string{"RPOP", "l"}, "$1\r\nc\r\n"},
		{[]string{"LMOVE", "l", "m", "LEFT", "RIGHT"}, "$1\r\na\r\n"},
		{[]string{"LPOP", "l"}, "$-1\r\n"},
		{[]string{"LLEN", "m"}, ":1\r\n"},
		{[]string{"BLPOP", "l", "m", "1"}, "*2\r\n$1\r\nm\r\n$1\r\na\r\n"},
		{[]string{"BLPOP", "l", "0.05"}, "*-1\r\n"},
		{[]string{"BLPOP", "l", "x"}, "-ERR timeout is not a float or out of range\r\n"},
		{[]string{"BLPOP", "l", "-1"}, "-ERR timeout is negative\r\n"},
		{[]string{"SET", "s", "v"}, "+OK\r\n"},
		{[]string{"LPUSH", "s", "x"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{[]string{"LMOVE", "l", "m", "UP", "LEFT"}, "-ERR syntax error\r\n"},
	})
	// A copy left on one backend (a stale signal) wakes a waiter once.
	if _, err := mrs[0].Lpush("sig", "1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := do(d, c, "BRPOP", "sig", "5"); got != "*2\r\n$3\r\nsig\r\n$1\r\n1\r\n" {
		t.Fatalf("BRPOP of a stale signal = %q", got)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatal("BRPOP waited for its timeout with an element there")
	}
}

// TestTrackingKeyedReadInMulti: a keyed read queued in MULTI (MGET, as
// rueidis's DoCache sends it) is tracked at EXEC for every key it names;
// on backends that cannot track, each is invalidated right after EXEC.
func TestTrackingKeyedReadInMulti(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c, got := hooked(d)
	do(d, c, "HELLO", "3")
	runAll(t, d, c, []run{
		{[]string{"CLIENT", "TRACKING", "ON"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"MGET", "a", "b"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n*2\r\n_\r\n_\r\n"},
	})
	got.want(t, ">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n")
}

// TestTrackingWithinPatterns: a user limited to key patterns may not
// BCAST every key nor a prefix outside its patterns, and is never told of
// a key outside them or of the proxy's own keys.
func TestTrackingWithinPatterns(t *testing.T) {
	a, _ := newAuthState("", []User{
		{Name: "app", Password: "p", Commands: []string{"*"}, Keys: []string{"app:*", "one"}},
		{Name: "all", Password: "p", Commands: []string{"*"}, Keys: []string{"*"}},
	})
	app, all := a.accounts["app"], a.accounts["all"]
	for _, c := range []struct {
		u        *account
		prefixes []string
		ok       bool
	}{
		{app, nil, false},
		{app, []string{"app:"}, true},
		{app, []string{"app:orders:"}, true},
		{app, []string{"ap"}, false},
		{app, []string{"one"}, false},
		{app, []string{"redlock-proxy:"}, false},
		{all, nil, true},
		{nil, nil, true},
	} {
		if got := prefixesAllowed(c.u, c.prefixes) == nil; got != c.ok {
			t.Errorf("prefixesAllowed(%v, %q) allowed = %v, want %v", c.u != nil && c.u.allKeys, c.prefixes, got, c.ok)
		}
	}
	if out, ok := deliverable(app, []string{"app:1", "other", "redlock-proxy:fence:x", "one"}); !ok || len(out) != 2 || out[0] != "app:1" || out[1] != "one" {
		t.Errorf("deliverable to app = %q, %v", out, ok)
	}
	if out, ok := deliverable(all, []string{"redlock-proxy:holds", "k"}); !ok || len(out) != 1 || out[0] != "k" {
		t.Errorf("deliverable to all = %q, %v", out, ok)
	}
	if _, ok := deliverable(nil, []string{"redlock-proxy:holds"}); ok {
		t.Errorf("a reserved key alone is delivered")
	}
	if out, ok := deliverable(app, nil); !ok || out != nil {
		t.Errorf("a flush is not delivered: %q, %v", out, ok)
	}
}
