package tests

import (
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestStartConnectsBackends: the proxy connects to its backends before it
// serves; a backend that is down at start is logged and the others serve
// the first lock at once.
func TestStartConnectsBackends(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	rs[2].Kill()
	p := startProxy(t, rs, "")
	// Written before it answered PING; the copy from its stderr to p.Log
	// may lag.
	testkit.Eventually(t, 5*time.Second, "the proxy to report the backend that was down at start", func() bool {
		return strings.Contains(p.Log(), "backends not connected yet: connected=2 count=3")
	})
	ctx := testCtx(t, 10*time.Second)
	c := p.Client(nil)
	r := mustLock(ctx, t, c, "first", 5000)
	if n := unlock(ctx, t, c, "first", r.Token); n != 1 {
		t.Fatalf("UNLOCK = %d, want 1", n)
	}
}

// TestAuthFailLimitConfigured: auth_fail_limit and auth_fail_window set
// the AUTH rate limit: after 2 failures the right password is refused too,
// until the window has passed.
func TestAuthFailLimitConfigured(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "requirepass = \"s3cret\"\nauth_fail_limit = 2\nauth_fail_window = \"1s\"")
	c := testkit.Dial(t, p.Addr())
	for i := range 2 {
		if v := c.Do("AUTH", "wrong"); !isErrPrefix(v, "WRONGPASS") {
			t.Fatalf("failure %d = %#v, want WRONGPASS", i+1, v)
		}
	}
	if v := c.Do("AUTH", "s3cret"); !isErrPrefix(v, "WRONGPASS") {
		t.Fatalf("AUTH with the right password after 2 failures = %#v, want WRONGPASS (rate limited)", v)
	}
	// The window passing is what is tested: it began at the first failure,
	// before this sleep, so the sleep is a lower bound a slow machine
	// cannot shorten.
	time.Sleep(1100 * time.Millisecond)
	if v := c.Do("AUTH", "s3cret"); v != "OK" {
		t.Fatalf("AUTH once the window passed = %#v, want OK", v)
	}
}

// TestAuth: requirepass gates every command until AUTH or HELLO AUTH.
func TestAuth(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, `requirepass = "s3cret"`)
	ctx := testCtx(t, 30*time.Second)

	c := testkit.Dial(t, p.Addr())
	if v := c.Do("LOCK", "k", "10000"); !isErrPrefix(v, "NOAUTH") {
		t.Fatalf("LOCK before AUTH = %#v, want an error starting with NOAUTH", v)
	}
	if v := c.Do("PING"); !isErrPrefix(v, "NOAUTH") {
		t.Fatalf("PING before AUTH = %#v, want an error starting with NOAUTH", v)
	}
	if v := c.Do("AUTH", "wrong"); !isErrPrefix(v, "WRONGPASS") {
		t.Fatalf("AUTH wrong = %#v, want an error starting with WRONGPASS", v)
	}
	if v := c.Do("AUTH", "default", "wrong"); !isErrPrefix(v, "WRONGPASS") {
		t.Fatalf("AUTH default wrong = %#v, want an error starting with WRONGPASS", v)
	}
	if v := c.Do("LOCK", "k", "10000"); !isErrPrefix(v, "NOAUTH") {
		t.Fatalf("LOCK after a failed AUTH = %#v, want NOAUTH", v)
	}
	if v := c.Do("AUTH", "s3cret"); v != "OK" {
		t.Fatalf("AUTH s3cret = %#v, want OK", v)
	}
	arr, ok := c.Do("LOCK", "k", "10000").([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("LOCK after AUTH = %#v, want [token validity nil]", arr)
	}
	if v := c.Do("UNLOCK", "k", arr[0].(string)); v != int64(1) {
		t.Fatalf("UNLOCK after AUTH = %#v, want 1", v)
	}

	c2 := testkit.Dial(t, p.Addr())
	if v := c2.Do("AUTH", "default", "s3cret"); v != "OK" {
		t.Fatalf("AUTH default s3cret = %#v, want OK", v)
	}

	h := testkit.Dial(t, p.Addr())
	if v := h.Do("HELLO", "3", "AUTH", "default", "wrong"); !isErrPrefix(v, "WRONGPASS") {
		t.Fatalf("HELLO 3 AUTH default wrong = %#v, want WRONGPASS", v)
	}
	m, ok := h.Do("HELLO", "3", "AUTH", "default", "s3cret").(map[any]any)
	if !ok || m["proto"] != int64(3) {
		t.Fatalf("HELLO 3 AUTH default s3cret = %#v, want a map with proto 3", m)
	}
	if v := h.Do("PING"); v != "PONG" {
		t.Fatalf("PING after HELLO AUTH = %#v", v)
	}

	for _, proto := range []int{2, 3} {
		gc := p.Client(&redis.Options{Protocol: proto, Password: "s3cret"})
		r := mustLock(ctx, t, gc, "go-redis-"+strconv.Itoa(proto), 10000)
		if n := unlock(ctx, t, gc, "go-redis-"+strconv.Itoa(proto), r.Token); n != 1 {
			t.Fatalf("go-redis RESP%d with Password: UNLOCK = %d", proto, n)
		}
		bad := p.Client(&redis.Options{Protocol: proto, Password: "nope"})
		if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("go-redis RESP%d with a wrong Password: PING err = %v, want WRONGPASS", proto, err)
		}
	}

	// Before AUTH the input limits are stricter.
	u := testkit.Dial(t, p.Addr())
	u.Send([]byte("*1000\r\n"))
	if v := u.ReadReply(); v != testkit.Error("ERR Protocol error: unauthenticated multibulk length") {
		t.Fatalf("*1000 before AUTH = %#v, want -ERR Protocol error: unauthenticated multibulk length", v)
	}
	u.ExpectClosed(2 * time.Second)
	u2 := testkit.Dial(t, p.Addr())
	u2.Send([]byte("*9223372036854775807\r\n"))
	if v := u2.ReadReply(); v != testkit.Error("ERR Protocol error: invalid multibulk length") &&
		v != testkit.Error("ERR Protocol error: unauthenticated multibulk length") {
		t.Fatalf("*9223372036854775807 before AUTH = %#v, want an invalid/unauthenticated multibulk length error", v)
	}
	u2.ExpectClosed(2 * time.Second)
	u3 := testkit.Dial(t, p.Addr())
	u3.Send([]byte("*1\r\n$1000000\r\n"))
	if v := u3.ReadReply(); !isErrPrefix(v, "ERR Protocol error: ") {
		t.Fatalf("a 1 MB bulk before AUTH = %#v, want a protocol error", v)
	}
	u3.ExpectClosed(2 * time.Second)

	if strings.Contains(p.Log(), "s3cret") {
		t.Errorf("the proxy log shows the password")
	}
	if info, ok := c.Do("INFO").(string); ok && strings.Contains(info, "s3cret") {
		t.Errorf("INFO shows the password")
	}
}

// TestDevMode: -dev serves locks with embedded backends, no Redis needed.
func TestDevMode(t *testing.T) {
	t.Parallel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	// The embedded backends share the proxy's process and, under the
	// tests' load, its CPU: a deadline of a second, not 50 ms.
	p := startProxyArgs(t, addr, "-dev", "-listen", addr, "-node-timeout", "1s")
	ctx := testCtx(t, 20*time.Second)
	for _, proto := range []int{2, 3} {
		c := p.Client(&redis.Options{Protocol: proto})
		key := "dev-" + strconv.Itoa(proto)
		r := mustLock(ctx, t, c, key, 10000)
		if _, err := lock(ctx, t, c, key, 10000); !errors.Is(err, redis.Nil) {
			t.Fatalf("dev mode: LOCK on a held key: %v, want null", err)
		}
		if n := unlock(ctx, t, c, key, r.Token); n != 1 {
			t.Fatalf("dev mode: UNLOCK = %d, want 1", n)
		}
	}
	// Reads by vote of a key held without expiry, and a script that calls
	// TIME: the embedded backends took TIME in a read-only script for a
	// write, and refused both.
	c := p.Client(nil)
	if err := c.SetNX(ctx, "dev-held", "v", 0).Err(); err != nil {
		t.Fatalf("dev mode: SETNX: %v", err)
	}
	if got, err := c.MGet(ctx, "dev-held").Result(); err != nil || len(got) != 1 || got[0] != "v" {
		t.Errorf("dev mode: MGET of a held key = %v, %v", got, err)
	}
	if got, err := c.Eval(ctx, "return #redis.call('TIME')", nil).Int(); err != nil || got != 2 {
		t.Errorf("dev mode: a script calling TIME = %v, %v", got, err)
	}
	lines := strings.SplitN(p.Log(), "\n", 11)
	head := strings.ToLower(strings.Join(lines[:min(len(lines), 10)], "\n"))
	if !strings.Contains(head, "dev") {
		t.Fatalf("the first log lines do not mention dev mode:\n%s", p.Log())
	}
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(5 * time.Second); code != 0 {
		t.Fatalf("dev mode: exit code after SIGTERM = %d, want 0", code)
	}
}

// TestVersionFlag: -version prints something and exits 0.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	out, err := execOutput(proxyBin, "-version")
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("redlock-proxy -version = %q, %v; want a version and exit 0", out, err)
	}
}

// TestMaxClients: the connection over max_clients is refused with the Redis error.
func TestMaxClients(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "max_clients = 3")

	// The readiness probe's connection may not be released yet: retry.
	var held []*testkit.Conn
	deadline := time.Now().Add(5 * time.Second)
	for len(held) < 3 {
		c := testkit.Dial(t, p.Addr())
		v := c.Do("PING")
		switch {
		case v == "PONG":
			held = append(held, c)
		case v == testkit.Error("ERR max number of clients reached") && time.Now().Before(deadline):
			_ = c.Close()
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("connection %d: PING = %#v, want PONG", len(held)+1, v)
		}
	}
	fourth := testkit.Dial(t, p.Addr())
	fourth.SendCmd("PING")
	if v := fourth.ReadReply(); v != testkit.Error("ERR max number of clients reached") {
		t.Fatalf("4th connection with max_clients 3: %#v, want -ERR max number of clients reached", v)
	}
	fourth.ExpectClosed(2 * time.Second)

	// A slot frees when a client leaves.
	_ = held[0].Close()
	deadline = time.Now().Add(5 * time.Second)
	for {
		c := testkit.Dial(t, p.Addr())
		v := c.Do("PING")
		if v == "PONG" {
			break
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("after a client left, a new connection still gets %#v", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, c := range held[1:] {
		if v := c.Do("PING"); v != "PONG" {
			t.Fatalf("held connection %d: PING = %#v", i+2, v)
		}
	}
}

// TestFlagsOnly: the proxy runs from flags alone (-listen, repeated
// -backend as URL or host:port, -log-format json, -log-level).
func TestFlagsOnly(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	p := startProxyArgs(t, addr, "-listen", addr,
		"-backend", rs[0].URL(), "-backend", rs[1].Addr(), "-backend", rs[2].URL(),
		"-log-format", "json", "-log-level", "debug", "-max-ttl", "1s")
	ctx := testCtx(t, 30*time.Second)
	c := p.Client(nil)
	// Without a config file node_timeout is its default, 50 ms, and -max-ttl
	// 1s (it keeps the start-up quarantine short) caps the ttl: each backend
	// call has 50 ms, which a loaded machine may miss, and the LOCK then
	// answers NOQUORUM. Fresh backends are quarantined at start for max_ttl
	// + drift: NOQUORUM until then too. So every LOCK here is retried on
	// NOQUORUM (and on null: the rollback of a failed try may not have
	// landed yet), for at most 10 s: what this test checks is that the
	// flags alone make a working proxy.
	lockRetried := func() lockReply {
		t.Helper()
		var r lockReply
		testkit.Eventually(t, 10*time.Second, "LOCK flags 1000 to be granted", func() bool {
			var err error
			r, err = lock(ctx, t, c, "flags", 1000)
			if err != nil && !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "NOQUORUM") {
				t.Fatalf("LOCK flags 1000: %v", err)
			}
			return err == nil
		})
		return r
	}
	start := time.Now()
	first := lockRetried()
	t.Logf("first grant %v after start (start-up quarantine of fresh backends)", time.Since(start).Round(time.Millisecond))
	if n := unlock(ctx, t, c, "flags", first.Token); n != 1 {
		t.Fatalf("UNLOCK of the first grant = %d", n)
	}
	r := lockRetried()
	if n := holders(ctx, t, rs, "flags", r.Token); n < 2 {
		t.Fatalf("the key holds the token on %d of 3 backends, want at least 2", n)
	}
	if n := unlock(ctx, t, c, "flags", r.Token); n != 1 {
		t.Fatalf("UNLOCK = %d, want 1", n)
	}
	// A dead backend makes the driver log dial failures: those lines must be
	// JSON too (go-redis's own logger writes plain text to stderr).
	rs[2].Kill()
	r = lockRetried()
	if n := unlock(ctx, t, c, "flags", r.Token); n != 1 {
		t.Fatalf("UNLOCK with one backend dead = %d, want 1", n)
	}
	jsonLines := 0
	for _, line := range strings.Split(p.Log(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Errorf("with -log-format json, a log line is not a JSON object: %q", line)
			continue
		}
		jsonLines++
	}
	if jsonLines == 0 {
		t.Errorf("with -log-format json and -log-level debug the proxy logged nothing")
	}
}
