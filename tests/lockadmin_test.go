package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// respMap reads a RESP2 map (a flat array of names and values).
func respMap(t *testing.T, v any) map[string]any {
	t.Helper()
	a, ok := v.([]any)
	if !ok || len(a)%2 != 0 {
		t.Fatalf("not a map: %#v", v)
	}
	m := make(map[string]any, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		m[a[i].(string)] = a[i+1]
	}
	return m
}

// TestLockAdminRelease: an admin releases a lock whatever its token; the
// waiter queued for it is granted at once, the old holder's UNLOCK
// answers 0, the release is logged with who did it, and a user without
// admin is refused LOCKADMIN.
func TestLockAdminRelease(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, `user "app" {
  password = "app-secret"
  commands = ["*"]
  keys     = ["~*"]
}
user "ops" {
  password = "ops-secret"
  commands = ["*"]
  keys     = ["~*"]
  admin    = true
}`)
	login := func(user, pass, name string) *testkit.Conn {
		c := testkit.Dial(t, p.Addr())
		if v := c.Do("AUTH", user, pass); v != "OK" {
			t.Fatalf("AUTH %s = %#v", user, v)
		}
		if v := c.Do("CLIENT", "SETNAME", name); v != "OK" {
			t.Fatalf("CLIENT SETNAME = %#v", v)
		}
		return c
	}
	holder, waiter, app, ops := login("app", "app-secret", "holder"), login("app", "app-secret", "waiter"),
		login("app", "app-secret", "other"), login("ops", "ops-secret", "operator")

	arr, ok := holder.Do("LOCK", "jobs:1", "30000").([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("LOCK jobs:1 = %#v", arr)
	}
	token := arr[0].(string)
	waiter.SendCmd("LOCK", "jobs:1", "30000", "WAIT", "9000")

	for _, cmd := range [][]string{{"LOCKADMIN", "RELEASE", "jobs:1"}, {"LOCKADMIN", "WHO", "jobs:1"}, {"LOCKADMIN", "HOLDS"}} {
		if v := app.Do(cmd...); v != testkit.Error("NOPERM User app has no permissions to run the 'lockadmin' command") {
			t.Fatalf("app: %q = %#v, want NOPERM", cmd, v)
		}
	}

	var who map[string]any
	testkit.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
		who = respMap(t, ops.Do("LOCKADMIN", "WHO", "jobs:1"))
		return who["waiters"] == int64(1)
	})
	if who["held-here"] != int64(1) || who["client-name"] != "holder" || who["hold"] != int64(0) || who["nodes-holding"] != int64(3) {
		t.Fatalf("LOCKADMIN WHO jobs:1 = %v", who)
	}

	if v := ops.Do("LOCKADMIN", "RELEASE", "jobs:1"); v != int64(1) {
		t.Fatalf("LOCKADMIN RELEASE = %#v, want 1", v)
	}
	got, err := waiter.TryReadReply(10 * time.Second)
	if a, ok := got.([]any); err != nil || !ok || len(a) != 3 || a[0] == token {
		t.Fatalf("the waiter after the force release: %#v, %v; want a new grant", got, err)
	}
	if v := holder.Do("UNLOCK", "jobs:1", token); v != int64(0) {
		t.Fatalf("old holder's UNLOCK = %#v, want 0", v)
	}
	if who := respMap(t, ops.Do("LOCKADMIN", "WHO", "jobs:1")); who["client-name"] != "waiter" {
		t.Fatalf("LOCKADMIN WHO after the hand-over = %v", who)
	}
	testkit.Eventually(t, 5*time.Second, "the force release logged", func() bool {
		return strings.Contains(p.Log(), "lock force-released") && strings.Contains(p.Log(), "by=ops@127.0.0.1:")
	})
	if v := ops.Do("LOCKADMIN", "RELEASE", "free:1"); v != int64(0) {
		t.Fatalf("LOCKADMIN RELEASE of a free key = %#v, want 0", v)
	}

	// A hold (SETNX: kept without expiry) is listed, and force-released.
	if v := app.Do("SETNX", "hold:1", "v1"); v != int64(1) {
		t.Fatalf("SETNX = %#v", v)
	}
	holds, _ := ops.Do("LOCKADMIN", "HOLDS").([]any)
	if len(holds) != 1 {
		t.Fatalf("LOCKADMIN HOLDS = %#v", holds)
	}
	if h := respMap(t, holds[0]); h["key"] != "hold:1" || h["renewed-here"] != int64(1) || h["deadline-ms"] != int64(-1) {
		t.Fatalf("LOCKADMIN HOLDS = %v", h)
	}
	if who := respMap(t, ops.Do("LOCKADMIN", "WHO", "hold:1")); who["hold"] != int64(1) || who["ttl-ms"] != int64(-1) {
		t.Fatalf("LOCKADMIN WHO hold:1 = %v", who)
	}
	if v := ops.Do("LOCKADMIN", "RELEASE", "hold:1"); v != int64(1) {
		t.Fatalf("LOCKADMIN RELEASE hold:1 = %#v", v)
	}
	if v := app.Do("SETNX", "hold:1", "v2"); v != int64(1) {
		t.Fatalf("SETNX after the force release = %#v, want 1", v)
	}
	if v := ops.Do("LOCKADMIN", "RELEASE"); !isErrPrefix(v, "ERR wrong number of arguments for 'lockadmin|release'") {
		t.Fatalf("LOCKADMIN RELEASE without a key = %#v", v)
	}
}
