package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestUsers: user blocks limit an app user to its commands and keys; an
// admin user (password from a file) runs the admin commands; HELLO AUTH and
// go-redis's Username work; AUTH is refused after ten failures.
func TestUsers(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	passFile := filepath.Join(t.TempDir(), "ops-password")
	if err := os.WriteFile(passFile, []byte("0ps-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, rs, `allow_flush = true
user "orders" {
  password = "p1-orders-secret"
  commands = ["LOCK", "UNLOCK", "EXTEND"]
  keys     = ["orders:*"]
}
user "ops" {
  password_file = "`+passFile+`"
  commands      = ["*"]
  keys          = ["~*"]
  admin         = true
}`)
	ctx := testCtx(t, 30*time.Second)

	// Users and no requirepass: nothing runs before AUTH.
	c := testkit.Dial(t, p.Addr())
	if v := c.Do("LOCK", "orders:1", "1000"); !isErrPrefix(v, "NOAUTH") {
		t.Fatalf("LOCK before AUTH = %#v, want NOAUTH", v)
	}
	if v := c.Do("AUTH", "orders", "p1-orders-secret"); v != "OK" {
		t.Fatalf("AUTH orders = %#v", v)
	}
	arr, ok := c.Do("LOCK", "orders:1", "5000").([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("orders: LOCK orders:1 = %#v, want [token validity nil]", arr)
	}
	token := arr[0].(string)
	if v := c.Do("EXTEND", "orders:1", token, "5000"); func() bool { n, ok := v.(int64); return !ok || n <= 0 }() {
		t.Fatalf("orders: EXTEND = %#v", v)
	}
	if v := c.Do("LOCK", "billing:1", "5000"); v != testkit.Error("NOPERM No permissions to access a key") {
		t.Fatalf("orders: LOCK billing:1 = %#v, want NOPERM for the key", v)
	}
	for _, cmd := range [][]string{{"LOCKS"}, {"FLUSHDB"}, {"GET", "orders:1"}} {
		want := testkit.Error("NOPERM User orders has no permissions to run the '" + strings.ToLower(cmd[0]) + "' command")
		if v := c.Do(cmd...); v != want {
			t.Fatalf("orders: %q = %#v, want %q", cmd, v, want)
		}
	}
	if v := c.Do("CLIENT", "LIST"); v != testkit.Error("NOPERM User orders has no permissions to run the 'client|list' command") {
		t.Fatalf("orders: CLIENT LIST = %#v", v)
	}
	if v := c.Do("PING"); v != "PONG" {
		t.Fatalf("orders: PING = %#v", v)
	}
	if v := c.Do("UNLOCK", "orders:1", token); v != int64(1) {
		t.Fatalf("orders: UNLOCK = %#v", v)
	}

	// HELLO 3 AUTH, and go-redis with Username over RESP2 and RESP3.
	h := testkit.Dial(t, p.Addr())
	m, ok := h.Do("HELLO", "3", "AUTH", "orders", "p1-orders-secret").(map[any]any)
	if !ok || m["proto"] != int64(3) {
		t.Fatalf("HELLO 3 AUTH orders = %#v", m)
	}
	if v := h.Do("LOCKS"); !isErrPrefix(v, "NOPERM") {
		t.Fatalf("orders over RESP3: LOCKS = %#v, want NOPERM", v)
	}
	for _, proto := range []int{2, 3} {
		gc := p.Client(&redis.Options{Protocol: proto, Username: "orders", Password: "p1-orders-secret"})
		key := "orders:go-redis-" + strconv.Itoa(proto)
		r := mustLock(ctx, t, gc, key, 10000)
		if n := unlock(ctx, t, gc, key, r.Token); n != 1 {
			t.Fatalf("go-redis RESP%d as orders: UNLOCK = %d", proto, n)
		}
	}

	// The admin runs what orders may not; its password came from a file.
	a := testkit.Dial(t, p.Addr())
	if v := a.Do("AUTH", "ops", "0ps-secret"); v != "OK" {
		t.Fatalf("AUTH ops = %#v", v)
	}
	for _, cmd := range [][]string{{"LOCKS"}, {"CLIENT", "LIST"}, {"GET", "billing:1"}, {"FLUSHDB"}} {
		if v := a.Do(cmd...); isErrPrefix(v, "NOPERM") || isErrPrefix(v, "ERR") {
			t.Fatalf("ops: %q = %#v", cmd, v)
		}
	}
	if list, _ := a.Do("CLIENT", "LIST").(string); !strings.Contains(list, "user=orders") || !strings.Contains(list, "user=ops") {
		t.Fatalf("CLIENT LIST does not name the users: %q", list)
	}

	// RESET logs out.
	if v := c.Do("RESET"); v != "RESET" {
		t.Fatalf("RESET = %#v", v)
	}
	if v := c.Do("PING"); !isErrPrefix(v, "NOAUTH") {
		t.Fatalf("PING after RESET = %#v, want NOAUTH", v)
	}

	// Wrong password and unknown user: the same WRONGPASS; after ten
	// failures from this address (within 10s) even the right password is
	// refused.
	w := testkit.Dial(t, p.Addr())
	const wrongPass = testkit.Error("WRONGPASS invalid username-password pair or user is disabled.")
	for i, cmd := range [][]string{
		{"AUTH", "orders", "wrong-1"}, {"AUTH", "nosuch", "wrong-2"}, {"AUTH", "wrong-3"},
		{"HELLO", "3", "AUTH", "orders", "wrong-4"}, {"AUTH", "ops", "wrong-5"},
		{"AUTH", "orders", "wrong-6"}, {"AUTH", "orders", "wrong-7"}, {"AUTH", "orders", "wrong-8"},
		{"AUTH", "orders", "wrong-9"}, {"AUTH", "orders", "wrong-10"},
	} {
		if v := w.Do(cmd...); v != wrongPass {
			t.Fatalf("failure %d %q = %#v, want WRONGPASS", i+1, cmd, v)
		}
	}
	if v := w.Do("AUTH", "orders", "p1-orders-secret"); v != wrongPass {
		t.Fatalf("AUTH with the right password after 10 failures = %#v, want WRONGPASS (rate limited)", v)
	}
	if v := a.Do("LOCKS"); isErrPrefix(v, "NOAUTH") || isErrPrefix(v, "NOPERM") {
		t.Fatalf("a connection logged in before the limit = %#v", v)
	}

	log := p.Log()
	if !strings.Contains(log, "authentication rate limited") {
		t.Errorf("the rate limit is not logged:\n%s", log)
	}
	for _, secret := range []string{"p1-orders-secret", "0ps-secret", "wrong-1", "wrong-2", "wrong-3", "wrong-4", "wrong-5", "wrong-10"} {
		if strings.Contains(log, secret) {
			t.Errorf("the proxy log shows %q", secret)
		}
	}
}
