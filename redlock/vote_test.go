package redlock

import (
	"context"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// TestVoteReadApart: a read by vote (VoteRead) goes on the node's other
// connection, so that a large reply never holds up the lock calls behind
// its bytes: after a lock call and then a read by vote, the connection
// that sent the lock call still shows it as its last command on the
// backend (before, the read went on the same connection as every lock
// call); it runs read-only (EVALSHA_RO), so a write in it is refused by
// the backend; a write by vote stays on the calls' connection, in order
// with them.
func TestVoteReadApart(t *testing.T) {
	ctx := context.Background()
	r, cl := oneNodeRedlock(t, startRedis(t))
	lastCmds := func() []string {
		t.Helper()
		list, err := cl.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		var cmds []string
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			for _, f := range strings.Fields(line) {
				if c, ok := strings.CutPrefix(f, "cmd="); ok && c != "client|list" {
					cmds = append(cmds, c)
				}
			}
		}
		return cmds
	}
	has := func(cmds []string, c string) bool {
		for _, x := range cmds {
			if x == c {
				return true
			}
		}
		return false
	}

	if _, err := r.AcquireKeys(ctx, []string{"k"}, "tok", testTimeout, IfAbsent); err != nil {
		t.Fatal(err)
	}
	if cmds := lastCmds(); !has(cmds, "evalsha") && !has(cmds, "eval") {
		t.Fatalf("after the lock call, no connection's last command is the acquire script: %q", cmds)
	}
	read := script.New("return redis.call('GET', KEYS[1])").Guarded()
	if v, err := r.VoteRead(ctx, read, []string{"k"}, nil); err != nil || v != "tok" {
		t.Fatalf("VoteRead = %v, %v; want tok", v, err)
	}
	if cmds := lastCmds(); !(has(cmds, "evalsha") || has(cmds, "eval")) || !(has(cmds, "evalsha_ro") || has(cmds, "eval_ro")) {
		t.Fatalf("after the read by vote, the connections' last commands are %q: want the lock call's script beside the read's script, read-only", cmds)
	}
	// A write in what was sent as a read is refused by the backend.
	sneaky := script.New("return redis.call('SET', KEYS[1], 'x')").Guarded()
	v, err := r.VoteRead(ctx, sneaky, []string{"k"}, nil)
	if e, ok := v.(RedisError); err != nil || !ok || !strings.Contains(string(e), "not allowed from read-only scripts") {
		t.Fatalf("VoteRead of a write = %v, %v; want the backend's refusal", v, err)
	}
	if got, err := cl.Get(ctx, "k").Result(); err != nil || got != "tok" {
		t.Fatalf("k after the refused write = %q, %v; want tok", got, err)
	}
	write := script.New("return redis.call('SET', KEYS[1], ARGV[1])").Guarded()
	if _, err := r.Vote(ctx, write, []string{"w"}, []string{"v"}); err != nil {
		t.Fatal(err)
	}
	if cmds := lastCmds(); has(cmds, "set") {
		t.Fatalf("after the write by vote, a connection's last command is still the lock call's set (%q): the write went apart from the lock calls", cmds)
	}
}
