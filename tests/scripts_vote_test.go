package tests

import (
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestScriptsByVoteRefusedUpFront: through a real proxy on real backends, a
// script whose effect is each backend's own (SPOP) and a runaway loop are
// refused before any backend runs them, with the line and the reason; the
// set stays the same on every backend, and no backend is left busy: a LOCK
// is granted right after.
func TestScriptsByVoteRefusedUpFront(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	c := p.Client(&redis.Options{ReadTimeout: 5 * time.Second})
	ctx := testCtx(t, 30*time.Second)
	const key = "vote:set"

	if err := c.Eval(ctx, "return redis.call('sadd', KEYS[1], unpack(ARGV))", []string{key}, "a", "b", "c", "d", "e").Err(); err != nil {
		t.Fatalf("SADD by vote: %v", err)
	}
	for _, s := range []struct{ name, src, want string }{
		{"SPOP", "local m = redis.call('spop', KEYS[1])\nreturn m", "SPOP removes a random member"},
		{"SRANDMEMBER", "local m = redis.call('srandmember', KEYS[1])\nreturn redis.call('srem', KEYS[1], m)", "SRANDMEMBER picks random members"},
		{"runaway loop", "local i=0 while redis.call('scard',KEYS[1])>=0 do i=i+1 end return i", "while loop has no bound"},
	} {
		err := c.Eval(ctx, s.src, []string{key}).Err()
		if err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), s.want) {
			t.Errorf("EVAL %s: %v; want refused at line 1 with %q", s.name, err, s.want)
		}
	}
	// The SADD answered at a quorum; its last copy may land later. A
	// refused SPOP that ran anyway would leave a backend at 4 for good.
	testkit.Eventually(t, 10*time.Second, "the 5 members on every backend", func() bool {
		for _, r := range rs {
			if n, err := r.Client().SCard(ctx, key).Result(); err != nil || n != 5 {
				return false
			}
		}
		return true
	})
	mustLock(ctx, t, c, "vote:after", 5000)
}
