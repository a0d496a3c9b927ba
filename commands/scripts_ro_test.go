package commands

import (
	"fmt"
	"strings"
	"testing"
)

// TestEvalRO: EVAL_RO and EVALSHA_RO run a script that does not write as
// EVAL would (by vote, or a recognised read carried out), and refuse,
// before it runs, one that may write, in Redis 7's words: its shebang
// lacks no-writes, or a call may write or publish (at that line). Before,
// both were refused as commands ("EVAL_RO runs other scripts").
func TestEvalRO(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	const (
		get      = "return redis.call('GET', KEYS[1])"
		set      = "redis.call('SET', KEYS[1], ARGV[1]) return 1"
		publish  = "local n = 1\nredis.call('PUBLISH', 'ch', 'm')\nreturn n"
		byArg    = "return redis.call(ARGV[1], KEYS[1])"
		flagged  = "#!lua\nreturn 1"
		noWrites = "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])"
	)
	writeErr := func(src string, line int) string {
		return fmt.Sprintf("-ERR Write commands are not allowed from read-only scripts. script: %s, on @user_script:%d.\r\n", sha1Of(src), line)
	}
	runAll(t, d, c, []run{
		{[]string{"SET", "k", "v"}, "+OK\r\n"},
		{[]string{"EVAL_RO", get, "1", "k"}, "$1\r\nv\r\n"},
		{[]string{"EVAL_RO", noWrites, "1", "k"}, "$1\r\nv\r\n"},
		{[]string{"EVAL_RO", set, "1", "k", "w"}, writeErr(set, 1)},
		{[]string{"EVAL_RO", publish, "0"}, writeErr(publish, 2)},
		{[]string{"EVAL_RO", byArg, "1", "k", "GET"}, writeErr(byArg, 1)},
		{[]string{"EVAL_RO", flagged, "0"}, "-ERR Can not execute a script with write flag using *_ro command.\r\n"},
		{[]string{"EVAL_RO", "#!lua flags=bogus\nreturn 1", "0"}, "-ERR Unexpected flag in script shebang: bogus\r\n"},
		{[]string{"GET", "k"}, "$1\r\nv\r\n"},
		// A recognised release is refused before it runs: the lock stays.
		{[]string{"SET", "lock", "tok", "NX", "PX", "10000"}, "+OK\r\n"},
		{[]string{"EVAL_RO", testRelease, "1", "lock", "tok"}, writeErr(testRelease, 2)},
		{[]string{"EXISTS", "lock"}, ":1\r\n"},
		// A recognised read is carried out.
		{[]string{"EVAL_RO", testRemaining, "1", "lock", "other"}, ":0\r\n"},
		{[]string{"SCRIPT", "LOAD", get}, "$40\r\n" + sha1Of(get) + "\r\n"},
		{[]string{"EVALSHA_RO", sha1Of(get), "1", "k"}, "$1\r\nv\r\n"},
		{[]string{"SCRIPT", "LOAD", set}, "$40\r\n" + sha1Of(set) + "\r\n"},
		{[]string{"EVALSHA_RO", sha1Of(set), "1", "k", "w"}, writeErr(set, 1)},
		{[]string{"EVALSHA_RO", "0000000000000000000000000000000000000000", "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"EVAL_RO", get, "2", "k"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		// Queued in MULTI, it runs at EXEC with its keys.
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"EVAL_RO", get, "1", "k"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n$1\r\nv\r\n"},
	})
	if got := do(d, c, "EVAL_RO", testRemaining, "1", "lock", "tok"); !strings.HasPrefix(got, ":") || got == ":0\r\n" {
		t.Errorf("EVAL_RO of a recognised read of a held lock = %q, want its remaining ms", got)
	}
}
