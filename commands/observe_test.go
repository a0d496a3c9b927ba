package commands

import (
	"context"
	"strings"
	"testing"
	"time"
)

type observation struct {
	cmd, dialect string
	result       Outcome
}

// observed runs each command on c and returns what Observe heard.
func observed(t *testing.T, d *Dispatcher, c *Client, cmds ...[]string) []observation {
	t.Helper()
	var got []observation
	d.opts.Observe = func(cmd, dialect string, result Outcome, el time.Duration) {
		if el < 0 {
			t.Errorf("%s: negative duration %v", cmd, el)
		}
		got = append(got, observation{cmd, dialect, result})
	}
	defer func() { d.opts.Observe = nil }()
	for _, s := range cmds {
		d.Do(context.Background(), c, args(s...))
	}
	return got
}

func TestObserve(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	lockReply := do(d, c, "LOCK", "held", "5000")
	token := strings.Split(lockReply, "\r\n")[2]
	do(d, c, "SET", "taken2", "x", "NX", "PX", "5000")

	for _, tc := range []struct {
		cmd  []string
		want observation
	}{
		{[]string{"LOCK", "free", "5000"}, observation{"lock", DialectNative, ResultOK}},
		{[]string{"lock", "held", "5000"}, observation{"lock", DialectNative, ResultHeld}},
		{[]string{"UNLOCK", "held", "wrong"}, observation{"unlock", DialectNative, ResultNotHeld}},
		{[]string{"EXTEND", "held", "wrong", "5000"}, observation{"extend", DialectNative, ResultNotHeld}},
		{[]string{"UNLOCK", "held", token}, observation{"unlock", DialectNative, ResultOK}},
		{[]string{"LOCK", "k", "1"}, observation{"lock", DialectNative, ResultError}},
		{[]string{"LOCK"}, observation{"lock", DialectNative, ResultError}},
		{[]string{"SET", "taken2", "y", "NX", "PX", "5000"}, observation{"set", DialectLegacy, ResultHeld}},
		{[]string{"SETNX", "taken2", "y"}, observation{"setnx", DialectLegacy, ResultHeld}},
		{[]string{"SET", "taken2", "y", "IFEQ", "nope", "PX", "5000"}, observation{"set", DialectLegacy, ResultNotHeld}},
		// SET's own parser reads the options (Unicode case folding
		// included), so a refused compare-and-set is not_held however
		// IFEQ is spelled.
		{[]string{"SET", "taken2", "y", "ıfeq", "nope"}, observation{"set", DialectLegacy, ResultNotHeld}},
		{[]string{"SET", "taken2", "y", "GET"}, observation{"set", DialectLegacy, ResultOK}},
		{[]string{"GET", "nothing"}, observation{"get", DialectLegacy, ResultNotHeld}},
		{[]string{"GET", "taken2"}, observation{"get", DialectLegacy, ResultOK}},
		{[]string{"PTTL", "nothing"}, observation{"pttl", DialectLegacy, ResultNotHeld}},
		{[]string{"DELIFEQ", "taken2", "nope"}, observation{"delifeq", DialectLegacy, ResultNotHeld}},
		// A release of a lock another owner holds: 0.
		{[]string{"EVAL", testRelease, "1", "taken2", "nope"}, observation{"eval", DialectScript, ResultNotHeld}},
		// An acquire of a held key: 0.
		{[]string{"EVAL", testAcquireAll, "1", "taken2", "v", "5000"}, observation{"eval", DialectScript, ResultHeld}},
		{[]string{"EVALSHA", "0000000000000000000000000000000000000000", "0"}, observation{"evalsha", DialectScript, ResultError}},
		{[]string{"PING"}, observation{"ping", "", ResultOK}},
		{[]string{"DBSIZE"}, observation{"dbsize", "", ResultOK}},
		{[]string{"NOSUCH", "x"}, observation{"unknown", "", ResultError}},
		{[]string{"MULTI"}, observation{"multi", DialectTx, ResultOK}},
		{[]string{"LOCK", "k", "5000"}, observation{"lock", DialectTx, ResultError}}, // no script can call it: refused, in the tx dialect
		{[]string{"EXEC"}, observation{"exec", DialectTx, ResultError}},
	} {
		got := observed(t, d, c, tc.cmd)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q: observed %+v, want one %+v", tc.cmd, got, tc.want)
		}
	}
}

// TestObserveOutcomeIsTheHandlers: the outcome is what the handler said,
// never read back from the reply's text. A script's own error reply that
// happens to start with NOQUORUM is an error of the script, not a quorum
// failure (the observer took it for one when it read the reply's text).
func TestObserveOutcomeIsTheHandlers(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	mimic := "redis.call('GET', KEYS[1]) return redis.error_reply('NOQUORUM said by the script')"
	got := observed(t, d, c, []string{"EVAL", mimic, "1", "k"})
	if want := (observation{"eval", DialectScript, ResultError}); len(got) != 1 || got[0] != want {
		t.Errorf("a script's own NOQUORUM error: observed %+v, want %+v", got, want)
	}
	if r := do(d, c, "EVAL", mimic, "1", "k"); r != "-NOQUORUM said by the script\r\n" {
		t.Errorf("reply %q, want the script's error as it gave it", r)
	}
}

func TestObserveNoQuorum(t *testing.T) {
	d, mrs := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	for _, m := range mrs[:2] {
		m.Close()
	}
	got := observed(t, d, c, []string{"LOCK", "q", "10000"})
	if want := (observation{"lock", DialectNative, ResultNoQuorum}); len(got) != 1 || got[0] != want {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
}

// TestObserveAllocs checks that the observer adds no allocation to a
// command: the names it passes are constants and the table's own strings.
func TestObserveAllocs(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	ping := args("PING")
	ctx := context.Background()
	base := testing.AllocsPerRun(200, func() { d.Do(ctx, c, ping) })
	n := 0
	d.opts.Observe = func(string, string, Outcome, time.Duration) { n++ }
	with := testing.AllocsPerRun(200, func() { d.Do(ctx, c, ping) })
	d.opts.Observe = nil
	if with > base || n == 0 {
		t.Fatalf("PING allocates %v times with an observer, %v without (observed %d)", with, base, n)
	}
}

// TestRefusalAllocs: a refused script or vote answers with a refusal
// marked once (0 or null), allocating nothing for the mark.
func TestRefusalAllocs(t *testing.T) {
	for _, r := range []Reply{Int(0), Null{}} {
		for _, o := range []Outcome{ResultHeld, ResultNotHeld} {
			var got Reply
			if n := testing.AllocsPerRun(100, func() { got = scriptReply(r, o) }); n != 0 {
				t.Errorf("scriptReply(%#v, %s): %v allocations, want 0", r, o, n)
			}
			if outcomeOf(got) != o || unwrap(got) != r {
				t.Errorf("scriptReply(%#v, %s) = %#v", r, o, got)
			}
		}
	}
}
