package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// deepScript returns a table nested 1100 deep: Redis answers it in full,
// past the proxy's reader bound (1000). It writes, so it runs on the
// backends (a script that only reads may run in the proxy's sandbox,
// which caps nesting itself).
const deepScript = `local t = {redis.call('incr', KEYS[1])}
local c = t
for i = 1, 1100 do
  local n = {}
  c[1] = n
  c = n
end
return t`

// TestDeepReplyIsTheClientsError: a client that keeps sending a script by
// vote whose reply nests past the proxy's bound gets an error each time,
// and that is all: no backend is counted as failing (down_after = 1, so a
// single count would show), every backend stays up in INFO backends, and
// LOCK through another connection keeps being granted.
func TestDeepReplyIsTheClientsError(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "down_after = 1")
	c := p.Client(&redis.Options{ReadTimeout: 5 * time.Second})
	other := p.Client(&redis.Options{ReadTimeout: 5 * time.Second})
	ctx := testCtx(t, 60*time.Second)
	mustLock(ctx, t, other, "deep:warm", 5000)

	for i := range 20 {
		err := c.Eval(ctx, deepScript, []string{"deep:k"}).Err()
		if err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Fatalf("EVAL %d: %v; want the bound's error", i, err)
		}
		mustLock(ctx, t, other, fmt.Sprintf("deep:lock%d", i), 5000)
	}
	info, err := other.Info(ctx, "backends").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(info, ",state=up"); n != len(rs) {
		t.Fatalf("%d of %d backends up after the deep replies:\n%s", n, len(rs), info)
	}
	if v, err := infoValue(info, "voting"); err != nil || v != "3" {
		t.Fatalf("voting = %q (%v), want 3:\n%s", v, err, info)
	}
}

// infoValue is field's value in an INFO text.
func infoValue(info, field string) (string, error) {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %s in INFO", field)
}

// largeScript returns 70 strings of 1 MiB: 70 MiB, past the proxy's
// reader bound on one reply (64 MiB), though each string is within what
// a script by vote may build.
const largeScript = `local t = {redis.call('incr', KEYS[1])}
for i = 1, 70 do
  t[i] = string.rep('x', 1048576)
end
return t`

// TestLargeReplyIsTheClientsError: as TestDeepReplyIsTheClientsError, for
// a reply larger than the bound: the client gets an error, no backend is
// counted as failing, and LOCK is granted through another connection.
func TestLargeReplyIsTheClientsError(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	// Building and sending 70 MiB takes longer than the default
	// script_timeout on a loaded machine.
	p := startProxy(t, rs, "down_after = 1\nscript_timeout = \"10s\"")
	c := p.Client(&redis.Options{ReadTimeout: 20 * time.Second})
	other := p.Client(&redis.Options{ReadTimeout: 20 * time.Second})
	ctx := testCtx(t, 120*time.Second)
	for i := range 3 {
		err := c.Eval(ctx, largeScript, []string{"large:k"}).Err()
		if err == nil || !strings.Contains(err.Error(), "reply larger than") {
			t.Fatalf("EVAL %d: %v; want the bound's error", i, err)
		}
		mustLock(ctx, t, other, fmt.Sprintf("large:lock%d", i), 5000)
	}
	info, err := other.Info(ctx, "backends").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(info, ",state=up"); n != len(rs) {
		t.Fatalf("%d of %d backends up after the large replies:\n%s", n, len(rs), info)
	}
}
