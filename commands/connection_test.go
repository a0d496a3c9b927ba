package commands

import "testing"

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
