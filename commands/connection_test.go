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
