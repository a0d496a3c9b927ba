package commands

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// step is one command and the exact reply one Redis 7 gives it.
type step struct {
	in   []string
	want string
}

// runSteps runs steps in order on one connection.
func runSteps(t *testing.T, d *Dispatcher, c *Client, steps []step) {
	t.Helper()
	for _, s := range steps {
		if got := do(d, c, s.in...); got != s.want {
			t.Errorf("%q = %q, want %q", s.in, got, s.want)
		}
	}
}

// TestRejectedInsideMulti: a command refused before it runs (unknown, or
// of the wrong arity) inside MULTI makes EXEC abort, and an EXEC of the
// wrong arity aborts the transaction with the reason, as Redis's
// rejectCommand does. Before, EXEC ran what was queued.
func TestRejectedInsideMulti(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	abort := "-EXECABORT Transaction discarded because of previous errors.\r\n"
	runSteps(t, d, c, []step{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"GET", "a"}, "+QUEUED\r\n"},
		{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n"},
		{[]string{"EXEC"}, abort},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"FOO", "a", "b"}, "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"},
		{[]string{"EXEC"}, abort},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"GET", "a"}, "+QUEUED\r\n"},
		{[]string{"EXEC", "x"}, "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"},
		{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
		{[]string{"EXEC", "x"}, "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"GET", "a"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n$-1\r\n"},
	})
}

// TestPingArityWhenSubscribed: PING takes at most one argument in
// subscribed mode too. Before, a RESP2 subscriber's PING a b answered
// ["pong", ""].
func TestPingArityWhenSubscribed(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runSteps(t, d, c, []step{
		{[]string{"SUBSCRIBE", "ch"}, "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"},
		{[]string{"PING", "a", "b"}, "-ERR wrong number of arguments for 'ping' command\r\n"},
		{[]string{"PING", "a"}, "*2\r\n$4\r\npong\r\n$1\r\na\r\n"},
	})
}

// TestAuthUserWithoutPassword: with no password configured, the user
// "default" logs in with any password, as on Redis (nopass), and any
// other user name is WRONGPASS: Redis has no such user. Before, AUTH and
// HELLO AUTH answered OK for any name.
func TestAuthUserWithoutPassword(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	wrongPass := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	runSteps(t, d, c, []step{
		{[]string{"AUTH", "a", "b"}, wrongPass},
		{[]string{"HELLO", "3", "AUTH", "a", "b"}, wrongPass},
		{[]string{"AUTH", "default", "anything"}, "+OK\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
	})
}

// TestTrackingModeSwitch: as Redis 7, CLIENT TRACKING ON may move between
// the default mode and OPTIN or OPTOUT without OFF (only OPTIN to OPTOUT
// and back is refused), and CLIENT CACHING in the default mode names the
// mode it needs. Before, any change of mode was refused, and CACHING in
// the default mode answered the error for tracking off.
func TestTrackingModeSwitch(t *testing.T) {
	d, _ := newRelayDispatcher(t, 3)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	do(d, c, "HELLO", "3")
	runSteps(t, d, c, []step{
		{[]string{"CLIENT", "TRACKING", "ON"}, "+OK\r\n"},
		{[]string{"CLIENT", "CACHING", "YES"}, "-" + string(errCachingYes) + "\r\n"},
		{[]string{"CLIENT", "CACHING", "NO"}, "-" + string(errCachingNo) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN"}, "+OK\r\n"},
		{[]string{"CLIENT", "CACHING", "YES"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTOUT"}, "-" + string(errSwitchOpt) + "\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTOUT"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN"}, "-" + string(errSwitchOpt) + "\r\n"},
	})
}

// TestClientListOptions: CLIENT LIST TYPE t and ID id … filter as on
// Redis 7, other arguments are a syntax error, and a subscriber shows its
// counts and flag P. Before, every argument was ignored and every client
// showed sub=0 flags=N.
func TestClientListOptions(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	sub := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	do(d, sub, "SUBSCRIBE", "a", "b")
	do(d, sub, "PSUBSCRIBE", "p*")
	runSteps(t, d, c, []step{
		{[]string{"CLIENT", "LIST", "ID"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "LIST", "FOO"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "LIST", "TYPE", "normal", "x"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "LIST", "TYPE", "foo"}, "-ERR Unknown client type 'foo'\r\n"},
		{[]string{"CLIENT", "LIST", "ID", "x"}, "-ERR Invalid client ID\r\n"},
		{[]string{"CLIENT", "LIST", "ID", "99999"}, "$0\r\n\r\n"},
		{[]string{"CLIENT", "LIST", "TYPE", "replica"}, "$0\r\n\r\n"},
		{[]string{"CLIENT", "LIST", "TYPE", "master"}, "$0\r\n\r\n"},
	})
	ids := func(s ...string) []string { return append([]string{"CLIENT", "LIST"}, s...) }
	for _, tc := range []struct {
		in   []string
		want []string // the ids listed, in order
	}{
		{ids(), []string{"id=1 ", "id=2 "}},
		{ids("ID", "2", "99", "1"), []string{"id=2 ", "id=1 "}},
		{ids("TYPE", "NORMAL"), []string{"id=1 "}},
		{ids("type", "pubsub"), []string{"id=2 "}},
	} {
		got := do(d, c, tc.in...)
		lines := strings.Split(strings.TrimSuffix(got[strings.Index(got, "\r\n")+2:], "\n\r\n"), "\n")
		if len(lines) != len(tc.want) {
			t.Errorf("%q = %q, want %d clients", tc.in, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%q line %d = %q, want %q", tc.in, i, lines[i], w)
			}
		}
	}
	if got := do(d, c, "CLIENT", "LIST", "ID", "2"); !strings.Contains(got, " flags=P ") || !strings.Contains(got, " sub=2 psub=1 ssub=0 ") {
		t.Errorf("CLIENT LIST of a subscriber = %q, want flags=P sub=2 psub=1", got)
	}
}

// TestClientSubcommandsOfRedis: CLIENT HELP lists the subcommands, and
// NO-EVICT and NO-TOUCH (which change nothing here: the proxy evicts no
// client and touches no key's LRU) answer as Redis 7.2 does. Before, each
// was an unknown subcommand. CLIENT SETINFO names an unknown attribute
// before it checks the value, as Redis 7.2.
func TestClientSubcommandsOfRedis(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runSteps(t, d, c, []step{
		{[]string{"CLIENT", "NO-EVICT", "on"}, "+OK\r\n"},
		{[]string{"CLIENT", "NO-EVICT", "OFF"}, "+OK\r\n"},
		{[]string{"CLIENT", "NO-EVICT", "maybe"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "NO-EVICT"}, "-ERR wrong number of arguments for 'client|no-evict' command\r\n"},
		{[]string{"CLIENT", "NO-TOUCH", "on"}, "+OK\r\n"},
		{[]string{"CLIENT", "NO-TOUCH", "x"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "SETINFO", "FOO", "a b"}, "-ERR Unrecognized option 'FOO'\r\n"},
		{[]string{"CLIENT", "HELP", "x"}, "-ERR wrong number of arguments for 'client|help' command\r\n"},
	})
	help := do(d, c, "CLIENT", "HELP")
	for _, want := range []string{"+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n", "+GETNAME\r\n", "+NO-EVICT (ON|OFF)\r\n", "+HELP\r\n"} {
		if !strings.HasPrefix(help, "*") || !strings.Contains(help, want) {
			t.Errorf("CLIENT HELP = %q, lacks %q", help, want)
		}
	}
}

// TestClientReply: CLIENT REPLY OFF silences every reply until CLIENT
// REPLY ON (which answers OK), SKIP silences itself and the next command,
// as on Redis. Before, REPLY was an unknown subcommand.
func TestClientReply(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	planned := func(s ...string) string {
		a := args(s...)
		return string(AppendReply(nil, d.DoPlanned(context.Background(), c, d.PlanFor(c, a), a), c.Proto()))
	}
	for _, s := range []step{
		{[]string{"CLIENT", "REPLY"}, "-ERR wrong number of arguments for 'client|reply' command\r\n"},
		{[]string{"CLIENT", "REPLY", "FOO"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "REPLY", "ON"}, "+OK\r\n"},
		{[]string{"CLIENT", "REPLY", "OFF"}, ""},
		{[]string{"PING"}, ""},
		{[]string{"GET"}, ""},
		{[]string{"CLIENT", "REPLY", "SKIP"}, ""}, // no effect while OFF
		{[]string{"CLIENT", "REPLY", "ON"}, "+OK\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"CLIENT", "REPLY", "SKIP"}, ""},
		{[]string{"ECHO", "a"}, ""},
		{[]string{"ECHO", "b"}, "$1\r\nb\r\n"},
		{[]string{"CLIENT", "REPLY", "OFF"}, ""},
		{[]string{"RESET"}, "+RESET\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"CLIENT", "REPLY", "SKIP"}, ""},
		{[]string{"RESET"}, ""},
		{[]string{"PING"}, "+PONG\r\n"},
	} {
		if got := planned(s.in...); got != s.want {
			t.Errorf("%q = %q, want %q", s.in, got, s.want)
		}
	}
}

// TestCommandSubcommandsAsRedis: COMMAND's subcommands check their
// arguments as Redis 7 does, COMMAND INFO of an unknown name is a null
// bulk string ($-1), COMMAND GETKEYS answers from the table, and HELP
// lists them (CONFIG HELP too). Before, COMMAND COUNT x and COMMAND LIST
// FOO answered as if no argument was given, an unknown name was *-1, and
// GETKEYS and HELP were unknown subcommands.
func TestCommandSubcommandsAsRedis(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runSteps(t, d, c, []step{
		{[]string{"COMMAND", "COUNT", "x"}, "-ERR wrong number of arguments for 'command|count' command\r\n"},
		{[]string{"COMMAND", "HELP", "x"}, "-ERR wrong number of arguments for 'command|help' command\r\n"},
		{[]string{"COMMAND", "LIST", "FOO"}, "-ERR syntax error\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY"}, "-ERR syntax error\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "foo", "x"}, "-ERR syntax error\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "pattern", "getse*"}, "*1\r\n$6\r\ngetset\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "MODULE", "x"}, "*0\r\n"},
		{[]string{"COMMAND", "INFO", "nosuch"}, "*1\r\n$-1\r\n"},
		{[]string{"COMMAND", "GETKEYS"}, "-ERR wrong number of arguments for 'command|getkeys' command\r\n"},
		{[]string{"COMMAND", "GETKEYS", "get"}, "-ERR wrong number of arguments for 'command|getkeys' command\r\n"},
		{[]string{"COMMAND", "GETKEYS", "nosuch", "a"}, "-ERR Invalid command specified\r\n"},
		{[]string{"COMMAND", "GETKEYS", "ping", "a"}, "-ERR The command has no key arguments\r\n"},
		{[]string{"COMMAND", "GETKEYS", "get", "a", "b"}, "-ERR Invalid number of arguments specified for command\r\n"},
		{[]string{"COMMAND", "GETKEYS", "get", "a"}, "*1\r\n$1\r\na\r\n"},
		{[]string{"COMMAND", "GETKEYS", "SET", "a", "b", "PX", "10"}, "*1\r\n$1\r\na\r\n"},
		{[]string{"COMMAND", "GETKEYS", "mset", "a", "b", "c", "d"}, "*2\r\n$1\r\na\r\n$1\r\nc\r\n"},
		{[]string{"COMMAND", "GETKEYS", "eval", "return 1", "1", "k", "a"}, "*1\r\n$1\r\nk\r\n"},
		{[]string{"COMMAND", "GETKEYS", "eval", "return 1", "5", "k"}, "*0\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"}, "*0\r\n"},
		{[]string{"CONFIG", "RESETSTAT", "x"}, "-ERR wrong number of arguments for 'config|resetstat' command\r\n"},
		{[]string{"CONFIG", "SET"}, "-ERR wrong number of arguments for 'config|set' command\r\n"},
	})
	for _, cmd := range []string{"COMMAND", "CONFIG"} {
		help := do(d, c, cmd, "HELP")
		if !strings.HasPrefix(help, "*") || !strings.Contains(help, "+"+cmd+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n") || !strings.Contains(help, "+HELP\r\n") {
			t.Errorf("%s HELP = %q", cmd, help)
		}
	}
}

// TestVerbatimInRESP3: INFO, CLIENT INFO and CLIENT LIST answer a RESP3
// client with a verbatim string of format txt, as Redis 7 does, and a
// RESP2 client with a bulk string. Before, RESP3 got a bulk string.
func TestVerbatimInRESP3(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	if got := do(d, c, "INFO", "nosuch"); got != "$0\r\n\r\n" {
		t.Errorf("RESP2 INFO nosuch = %q", got)
	}
	do(d, c, "HELLO", "3")
	if got := do(d, c, "INFO", "nosuch"); got != "=4\r\ntxt:\r\n" {
		t.Errorf("RESP3 INFO nosuch = %q, want =4\\r\\ntxt:\\r\\n", got)
	}
	if got := do(d, c, "CLIENT", "LIST", "ID", "999"); got != "=4\r\ntxt:\r\n" {
		t.Errorf("RESP3 CLIENT LIST ID 999 = %q", got)
	}
	for _, in := range [][]string{{"CLIENT", "INFO"}, {"INFO", "server"}} {
		got := do(d, c, in...)
		n, _, ok := strings.Cut(got[1:], "\r\n")
		if !strings.HasPrefix(got, "=") || !ok || !strings.HasPrefix(got[len(n)+3:], "txt:") {
			t.Errorf("RESP3 %q = %q, want a verbatim string", in, got)
		}
	}
}

// TestClientInfoFields: a CLIENT INFO / CLIENT LIST line has every field
// of Redis 7's, in its order: redis-py's client_info() converts qbuf,
// qbuf-free, argv-mem, obl, oll, omem and tot-mem to integers and raised
// KeyError on the proxy's line, which lacked them.
func TestClientInfoFields(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	got := do(d, c, "CLIENT", "INFO")
	line := strings.TrimSuffix(got[strings.Index(got, "\r\n")+2:], "\n\r\n")
	var keys []string
	for _, f := range strings.Split(line, " ") {
		k, _, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("field %q of %q has no '='", f, line)
		}
		keys = append(keys, k)
	}
	want := "id addr laddr fd name age idle flags db sub psub ssub multi watch qbuf qbuf-free argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp lib-name lib-ver"
	if strings.Join(keys, " ") != want {
		t.Errorf("CLIENT INFO fields = %q\nwant %q", strings.Join(keys, " "), want)
	}
	idle := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	if got := do(d, c, "CLIENT", "LIST", "ID", strconv.FormatInt(idle.ID, 10)); !strings.Contains(got, " cmd=NULL ") {
		t.Errorf("CLIENT LIST of a client that ran nothing = %q, want cmd=NULL as Redis", got)
	}
}

// TestLocalCommandsInMulti: commands the proxy answers from its own state
// and that change nothing (PING, ECHO, DBSIZE, …) are queued inside MULTI
// and answered at EXEC in order, as on Redis. Before, they were refused
// and EXEC aborted.
func TestLocalCommandsInMulti(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runSteps(t, d, c, []step{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"PING"}, "+QUEUED\r\n"},
		{[]string{"ECHO", "x"}, "+QUEUED\r\n"},
		{[]string{"GET", "a"}, "+QUEUED\r\n"},
		{[]string{"DBSIZE"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*4\r\n+PONG\r\n$1\r\nx\r\n$-1\r\n:0\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"CLIENT", "SETNAME", "x"}, "-" + errTxOnly + "\r\n"}, // changes the connection: still refused
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	})
}

// TestHelloChecksOptionsBeforeAuth: HELLO parses and checks every option
// before it authenticates, as Redis: a bad name after AUTH is refused
// without a login attempt. Before, the password was checked first.
func TestHelloChecksOptionsBeforeAuth(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "pw")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	runSteps(t, d, c, []step{
		{[]string{"HELLO", "3", "AUTH", "default", "bad", "SETNAME", "a b"}, "-" + string(errClientName) + "\r\n"},
		{[]string{"HELLO", "3", "AUTH", "default", "bad", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'\r\n"},
		{[]string{"PING"}, "-NOAUTH Authentication required.\r\n"},
	})
}
