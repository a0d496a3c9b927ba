package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestLockInfo: LOCKINFO shows validity, nodes holding, fence and whether
// this connection holds the lock, and never the token.
func TestLockInfo(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	a := testkit.Dial(t, p.Addr())
	hello3(t, a)
	b := testkit.Dial(t, p.Addr())
	hello3(t, b)

	if v := a.Do("LOCKINFO", "info"); v != nil {
		t.Fatalf("LOCKINFO of a free key = %#v, want null", v)
	}
	v := a.Do("LOCK", "info", "10000", "FENCE")
	lr, ok := v.([]any)
	if !ok || len(lr) != 3 {
		t.Fatalf("LOCK … FENCE = %#v", v)
	}
	token, fence := lr[0].(string), lr[2]

	mine, ok := a.Do("LOCKINFO", "info").(map[any]any)
	if !ok {
		t.Fatalf("LOCKINFO did not answer a map")
	}
	t.Logf("LOCKINFO: %v", mine)
	if vm, _ := mine["validity-ms"].(int64); vm <= 0 || vm > 10000 {
		t.Fatalf("validity-ms = %#v, want (0, 10000]", mine["validity-ms"])
	}
	if mine["nodes-holding"] != int64(5) || mine["nodes"] != int64(5) {
		t.Fatalf("nodes-holding/nodes = %#v/%#v, want 5/5", mine["nodes-holding"], mine["nodes"])
	}
	if mine["fence"] != fence {
		t.Fatalf("fence = %#v, want %#v", mine["fence"], fence)
	}
	if mine["held-by-this-connection"] != int64(1) {
		t.Fatalf("held-by-this-connection = %#v from the holder, want 1", mine["held-by-this-connection"])
	}
	theirs := b.Do("LOCKINFO", "info").(map[any]any)
	if theirs["held-by-this-connection"] != int64(0) {
		t.Fatalf("held-by-this-connection = %#v from another connection, want 0", theirs["held-by-this-connection"])
	}
	for _, m := range []map[any]any{mine, theirs} {
		if s := fmt.Sprint(m); strings.Contains(s, token) {
			t.Fatalf("LOCKINFO reveals the token: %s", s)
		}
	}

	// A lock the proxy did not grant (a legacy SET NX): still described,
	// token (the value) still hidden.
	if got := a.Do("SET", "legacy", "secret-value", "NX", "PX", "10000"); got != "OK" {
		t.Fatalf("SET NX = %#v", got)
	}
	leg := a.Do("LOCKINFO", "legacy").(map[any]any)
	if s := fmt.Sprint(leg); strings.Contains(s, "secret-value") {
		t.Fatalf("LOCKINFO reveals the value: %s", s)
	}
	if leg["nodes-holding"] != int64(5) || leg["held-by-this-connection"] != int64(0) {
		t.Fatalf("LOCKINFO legacy = %v", leg)
	}

	// Two of five backends stopped: nodes-holding says 3.
	for _, r := range rs[:2] {
		r.Stop()
	}
	three := b.Do("LOCKINFO", "info").(map[any]any)
	for _, r := range rs[:2] {
		r.Cont()
	}
	if three["nodes-holding"] != int64(3) {
		t.Fatalf("nodes-holding with 2 backends stopped = %#v, want 3", three["nodes-holding"])
	}

	if got := a.Do("UNLOCK", "info", token); got != int64(1) {
		t.Fatalf("UNLOCK = %#v", got)
	}
	if v := a.Do("LOCKINFO", "info"); v != nil {
		t.Fatalf("LOCKINFO after UNLOCK = %#v, want null", v)
	}
}

// locksHeld runs LOCKS and returns, per entry, its keys joined by spaces
// mapped to the entry.
func locksHeld(t testing.TB, c *testkit.Conn) map[string]map[any]any {
	t.Helper()
	v := c.Do("LOCKS")
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("LOCKS = %#v, want an array", v)
	}
	out := map[string]map[any]any{}
	for _, e := range arr {
		m, ok := e.(map[any]any)
		if !ok {
			t.Fatalf("LOCKS entry %#v, want a map", e)
		}
		var keys []string
		for _, k := range m["keys"].([]any) {
			keys = append(keys, k.(string))
		}
		out[strings.Join(keys, " ")] = m
	}
	return out
}

// TestLocksAndMLock: LOCKS lists exactly the locks held through the proxy;
// MLOCK takes several keys all or none.
func TestLocksAndMLock(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 5)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 30*time.Second)
	a := testkit.Dial(t, p.Addr())
	hello3(t, a)
	if got := a.Do("CLIENT", "SETNAME", "alpha"); got != "OK" {
		t.Fatalf("CLIENT SETNAME = %#v", got)
	}
	b := testkit.Dial(t, p.Addr())
	hello3(t, b)

	if got := locksHeld(t, a); len(got) != 0 {
		t.Fatalf("LOCKS at start = %v, want none", got)
	}
	ta := rawLock(t, a, "k-a", "10000")
	rawLock(t, b, "k-b", "10000", "SESSION")
	v := a.Do("MLOCK", "10000", "k-c", "k-d")
	ml, ok := v.([]any)
	if !ok || len(ml) != 3 {
		t.Fatalf("MLOCK = %#v", v)
	}
	tm := ml[0].(string)

	// All or none: k-d is held, so MLOCK k-d k-e takes neither.
	if v := b.Do("MLOCK", "10000", "k-e", "k-d"); v != nil {
		t.Fatalf("MLOCK over a held key = %#v, want null", v)
	}
	waitKeyGone(ctx, t, rs, "k-e")
	if v := b.Do("LOCK", "k-c", "10000"); v != nil {
		t.Fatalf("LOCK of a key MLOCK holds = %#v, want null", v)
	}

	got := locksHeld(t, b)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"k-a", "k-b", "k-c k-d"}) {
		t.Fatalf("LOCKS keys = %q, want k-a, k-b, k-c k-d", keys)
	}
	if e := got["k-a"]; e["client-name"] != "alpha" || e["session"] != int64(0) {
		t.Fatalf("LOCKS k-a = %v", e)
	}
	if e := got["k-b"]; e["session"] != int64(1) {
		t.Fatalf("LOCKS k-b = %v", e)
	}
	for _, tok := range []string{ta, tm} {
		if s := fmt.Sprint(got); strings.Contains(s, tok) {
			t.Fatalf("LOCKS reveals a token: %s", s)
		}
	}

	if got := a.Do("UNLOCK", "k-a", ta); got != int64(1) {
		t.Fatalf("UNLOCK = %#v", got)
	}
	if got := a.Do("MUNLOCK", tm, "k-c", "k-d"); got != int64(2) {
		t.Fatalf("MUNLOCK = %#v, want 2", got)
	}
	_ = b.Close() // the SESSION lock goes with its connection
	testkit.Eventually(t, 5*time.Second, "LOCKS to list no lock after every release", func() bool { return len(locksHeld(t, a)) == 0 })
	for _, k := range []string{"k-a", "k-b", "k-c", "k-d"} {
		waitKeyGone(ctx, t, rs, k)
	}
}
