package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestGoRedisProtocols: go-redis with its defaults (HELLO 3) and with RESP2.
func TestGoRedisProtocols(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	ctx := testCtx(t, 30*time.Second)
	for _, proto := range []int{0, 2, 3} {
		t.Run(fmt.Sprintf("protocol=%d", proto), func(t *testing.T) {
			c := p.Client(&redis.Options{Protocol: proto})
			c2 := p.Client(&redis.Options{Protocol: proto})
			key := "proto-" + strconv.Itoa(proto)
			if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
				t.Fatalf("PING = %q, %v; want PONG", got, err)
			}
			r := mustLock(ctx, t, c, key, 10000)
			v, err := c2.Do(ctx, "LOCK", key, 10000).Slice()
			if !errors.Is(err, redis.Nil) || v != nil {
				t.Fatalf("LOCK on a held key = %#v, %v; want nil (redis.Nil)", v, err)
			}
			if n := unlock(ctx, t, c2, key, r.Token); n != 1 {
				t.Fatalf("UNLOCK = %d, want 1", n)
			}
			r2 := mustLock(ctx, t, c2, key, 10000)
			if n, err := c.Do(ctx, "EXTEND", key, r2.Token, 10000).Int64(); err != nil || n <= 0 {
				t.Fatalf("EXTEND = %d, %v; want > 0", n, err)
			}
			if n := unlock(ctx, t, c, key, r2.Token); n != 1 {
				t.Fatalf("UNLOCK = %d, want 1", n)
			}
			// Connection commands go-redis users call.
			if got, err := c.Echo(ctx, "hi").Result(); err != nil || got != "hi" {
				t.Fatalf("ECHO hi = %q, %v", got, err)
			}
			if err := c.Do(ctx, "SELECT", 0).Err(); err != nil {
				t.Fatalf("SELECT 0: %v", err)
			}
			if err := c.Do(ctx, "SELECT", 1).Err(); err == nil || err.Error() != "ERR DB index is out of range" {
				t.Fatalf("SELECT 1: %v, want ERR DB index is out of range", err)
			}
			if err := c.Do(ctx, "CLIENT", "SETNAME", "e2e-client").Err(); err != nil {
				t.Fatalf("CLIENT SETNAME: %v", err)
			}
		})
	}
}

// TestRedisCLI: redis-cli one-shot commands against the proxy.
func TestRedisCLI(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not on PATH: run `make test`, which installs it")
	}
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	cli := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", p.Port()}, args...)...)
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redis-cli: %v", err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return out.String(), err
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("redis-cli %v hung; output so far %q", args, out.String())
			return "", nil
		}
	}

	if out, err := cli("PING"); err != nil || strings.TrimSpace(out) != "PONG" {
		t.Fatalf("redis-cli PING = %q, %v; want PONG", out, err)
	}
	out, err := cli("LOCK", "cli-key", "10000")
	if err != nil {
		t.Fatalf("redis-cli LOCK: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !tokenRE.MatchString(lines[0]) || strings.TrimSpace(lines[2]) != "" {
		t.Fatalf("redis-cli LOCK cli-key 10000 printed %q, want token, validity and an empty line", out)
	}
	if v, err := strconv.Atoi(lines[1]); err != nil || v <= 0 || v > 10000 {
		t.Fatalf("redis-cli LOCK validity line %q, want an integer in (0, 10000]", lines[1])
	}
	if out, err := cli("LOCK", "cli-key", "10000"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("redis-cli LOCK on a held key printed %q (%v), want an empty (nil) line", out, err)
	}
	if out, err := cli("UNLOCK", "cli-key", lines[0]); err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("redis-cli UNLOCK printed %q (%v), want 1", out, err)
	}
	out, err = cli("COMMAND", "DOCS")
	if err != nil {
		t.Fatalf("redis-cli COMMAND DOCS exited with %v: %s", err, out)
	}
	if strings.TrimSpace(out) == "" || strings.HasPrefix(out, "ERR") {
		t.Fatalf("redis-cli COMMAND DOCS printed %q, want the command docs", out)
	}
	if out, err := cli("-3", "HELLO", "3"); err != nil || !strings.Contains(out, "proto") {
		t.Fatalf("redis-cli -3 HELLO 3 printed %q (%v), want a map with proto", out, err)
	}
	if out, err := cli("INFO"); err != nil || !strings.Contains(out, "redis_version:") {
		t.Fatalf("redis-cli INFO printed %q (%v), want redis_version", out, err)
	}
}

// TestRawRESP2: the wire format a RESP2 client sees.
func TestRawRESP2(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	c := testkit.Dial(t, p.Addr())
	c2 := testkit.Dial(t, p.Addr())

	c.SendCmd("LOCK", "raw", "10000")
	if head := c.Peek(5); string(head) != "*3\r\n$" {
		t.Fatalf("LOCK reply starts with %q, want \"*3\\r\\n$\"", head)
	}
	v := c.ReadReply()
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("LOCK reply = %#v, want an array of 3", v)
	}
	tok, _ := arr[0].(string)
	if !tokenRE.MatchString(tok) {
		t.Fatalf("LOCK token = %#v", arr[0])
	}
	if n, ok := arr[1].(int64); !ok || n <= 0 || n > 10000 {
		t.Fatalf("LOCK validity = %#v", arr[1])
	}
	if arr[2] != nil {
		t.Fatalf("LOCK fence = %#v, want null", arr[2])
	}

	c2.SendCmd("LOCK", "raw", "10000")
	if head := c2.Peek(5); string(head) != "*-1\r\n" && string(head) != "$-1\r\n" {
		t.Fatalf("LOCK on a held key over RESP2 starts with %q, want a RESP2 null", head)
	}
	if v := c2.ReadReply(); v != nil {
		t.Fatalf("LOCK on a held key = %#v, want null", v)
	}
	if v := c2.Do("UNLOCK", "raw", "wrong"); v != int64(0) {
		t.Fatalf("UNLOCK wrong token = %#v, want 0", v)
	}
	if v := c.Do("UNLOCK", "raw", tok); v != int64(1) {
		t.Fatalf("UNLOCK = %#v, want 1", v)
	}

	// Inline commands and pipelining.
	c.Send([]byte("PING\r\nPING hello\r\n*1\r\n$4\r\nPING\r\n"))
	for _, want := range []any{"PONG", "hello", "PONG"} {
		if v := c.ReadReply(); v != want {
			t.Fatalf("pipelined PING = %#v, want %#v", v, want)
		}
	}
	if v := c.Do("QUIT"); v != "OK" {
		t.Fatalf("QUIT = %#v, want OK", v)
	}
	c.ExpectClosed(2 * time.Second)
}

// TestHelloAndRESP3: HELLO negotiation and RESP3 reply types.
func TestHelloAndRESP3(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	c := testkit.Dial(t, p.Addr())

	if v := c.Do("HELLO", "4"); !isErrPrefix(v, "NOPROTO") {
		t.Fatalf("HELLO 4 = %#v, want an error starting with NOPROTO", v)
	}
	v := c.Do("HELLO", "2")
	arr, ok := v.([]any)
	if !ok || len(arr)%2 != 0 {
		t.Fatalf("HELLO 2 = %#v, want a flat key/value array", v)
	}
	m2 := map[any]any{}
	for i := 0; i < len(arr); i += 2 {
		m2[arr[i]] = arr[i+1]
	}
	if m2["proto"] != int64(2) || m2["server"] != "redis" {
		t.Fatalf("HELLO 2 = %#v, want proto 2 and server redis", m2)
	}

	c.SendCmd("HELLO", "3", "SETNAME", "e2e")
	if head := c.Peek(1); head[0] != '%' {
		t.Fatalf("HELLO 3 reply starts with %q, want a RESP3 map", head)
	}
	m, ok := c.ReadReply().(map[any]any)
	if !ok {
		t.Fatalf("HELLO 3 did not return a map")
	}
	for k, want := range map[string]any{"server": "redis", "proto": int64(3), "mode": "standalone", "role": "master"} {
		if m[k] != want {
			t.Errorf("HELLO 3 %s = %#v, want %#v (map %#v)", k, m[k], want, m)
		}
	}
	if _, ok := m["id"].(int64); !ok {
		t.Errorf("HELLO 3 id = %#v, want an integer", m["id"])
	}
	if s, ok := m["version"].(string); !ok || s == "" {
		t.Errorf("HELLO 3 version = %#v, want a string", m["version"])
	}
	if mods, ok := m["modules"].([]any); !ok || len(mods) != 0 {
		t.Errorf("HELLO 3 modules = %#v, want an empty array", m["modules"])
	}
	if v := c.Do("CLIENT", "GETNAME"); v != "e2e" {
		t.Errorf("CLIENT GETNAME after HELLO SETNAME = %#v, want e2e", v)
	}

	r := c.Do("LOCK", "r3", "10000")
	arr, ok = r.([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("RESP3 LOCK = %#v", r)
	}
	tok, _ := arr[0].(string)
	c2 := testkit.Dial(t, p.Addr())
	c2.Do("HELLO", "3")
	c2.SendCmd("LOCK", "r3", "10000")
	if head := c2.Peek(3); string(head) != "_\r\n" {
		t.Fatalf("RESP3 LOCK on a held key starts with %q, want \"_\\r\\n\"", head)
	}
	c2.ReadReply()
	if v := c.Do("UNLOCK", "r3", tok); v != int64(1) {
		t.Fatalf("UNLOCK = %#v, want 1", v)
	}
	c2.SendCmd("CONFIG", "GET", "maxmemory")
	if v := c2.ReadReply(); !isEmptyAggregate(v) {
		t.Errorf("RESP3 CONFIG GET maxmemory = %#v, want an empty map/array", v)
	}
	if v := c.Do("RESET"); v != "RESET" {
		t.Errorf("RESET = %#v, want RESET", v)
	}
	// After RESET the connection is back to RESP2.
	c.SendCmd("LOCK", "r3", "10000")
	if head := c.Peek(4); string(head) != "*3\r\n" {
		t.Fatalf("LOCK after RESET starts with %q, want a RESP2 array", head)
	}
	c.ReadReply()
}

// TestConnectionCommands: the connection commands answer like Redis.
func TestConnectionCommands(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")
	c := testkit.Dial(t, p.Addr())

	info, ok := c.Do("INFO").(string)
	if !ok {
		t.Fatal("INFO did not return a bulk string")
	}
	for _, want := range []string{"redis_version:", "loading:0", "role:master", "redis_mode:standalone", "# Backends"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if strings.Contains(info, "\n") && !strings.Contains(info, "\r\n") {
		t.Errorf("INFO lines are not CRLF-separated")
	}
	if s, ok := c.Do("INFO", "server").(string); !ok || !strings.Contains(s, "redis_version:") {
		t.Errorf("INFO server = %q, want redis_version", s)
	}

	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if v := c.Do("ECHO", string(all)); v != string(all) {
		t.Errorf("ECHO of bytes 0x00-0xff = %q, want them back exactly", v)
	}
	if v := c.Do("ECHO", ""); v != "" {
		t.Errorf("ECHO '' = %#v", v)
	}
	if v := c.Do("PING", "a\r\nb"); v != "a\r\nb" {
		t.Errorf("PING msg = %#v, want the message back as a bulk string", v)
	}

	if v := c.Do("FOO", "a", "b"); v != testkit.Error("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ") {
		t.Errorf("FOO a b = %#v, want the Redis 7 unknown-command error", v)
	}
	if v := c.Do("foo"); v != testkit.Error("ERR unknown command 'foo', with args beginning with: ") {
		t.Errorf("foo = %#v, want the Redis 7 unknown-command error", v)
	}
	if v := c.Do("CLUSTER", "INFO"); v != testkit.Error("ERR This instance has cluster support disabled") {
		t.Errorf("CLUSTER INFO = %#v", v)
	}
	if v := c.Do("SELECT", "0"); v != "OK" {
		t.Errorf("SELECT 0 = %#v, want OK", v)
	}
	if v := c.Do("SELECT", "3"); v != testkit.Error("ERR DB index is out of range") {
		t.Errorf("SELECT 3 = %#v, want ERR DB index is out of range", v)
	}
	if v := c.Do("CONFIG", "GET", "maxmemory"); !isEmptyAggregate(v) {
		t.Errorf("CONFIG GET maxmemory = %#v, want an empty array", v)
	}
	if v, ok := c.Do("TIME").([]any); !ok || len(v) != 2 {
		t.Errorf("TIME = %#v, want [seconds, microseconds]", v)
	} else if s, _ := v[0].(string); !regexp.MustCompile(`^\d{10,}$`).MatchString(s) {
		t.Errorf("TIME seconds = %#v", v[0])
	}
	if _, ok := c.Do("DBSIZE").(int64); !ok {
		t.Errorf("DBSIZE is not an integer")
	}
	if n, ok := c.Do("COMMAND", "COUNT").(int64); !ok || n < 3 {
		t.Errorf("COMMAND COUNT = %d, want at least the native commands", n)
	}
	if v, ok := c.Do("COMMAND").([]any); !ok || len(v) == 0 {
		t.Errorf("COMMAND = %#v, want a non-empty array", v)
	}
	if v := c.Do("COMMAND", "INFO", "LOCK"); v == nil || isErrPrefix(v, "") {
		t.Errorf("COMMAND INFO LOCK = %#v", v)
	}
	if v := c.Do("COMMAND", "DOCS"); isErrPrefix(v, "") {
		t.Errorf("COMMAND DOCS = %#v", v)
	}
	if id, ok := c.Do("CLIENT", "ID").(int64); !ok || id <= 0 {
		t.Errorf("CLIENT ID = %#v", id)
	}
	if v := c.Do("CLIENT", "SETNAME", "e2e"); v != "OK" {
		t.Errorf("CLIENT SETNAME = %#v", v)
	}
	if v := c.Do("CLIENT", "GETNAME"); v != "e2e" {
		t.Errorf("CLIENT GETNAME = %#v, want e2e", v)
	}
	if v := c.Do("CLIENT", "SETINFO", "LIB-NAME", "e2e"); v != "OK" {
		t.Errorf("CLIENT SETINFO = %#v", v)
	}
	if s, ok := c.Do("CLIENT", "INFO").(string); !ok || !strings.Contains(s, "name=e2e") {
		t.Errorf("CLIENT INFO = %#v, want name=e2e", s)
	}
	if s, ok := c.Do("CLIENT", "LIST").(string); !ok || !strings.Contains(s, "id=") {
		t.Errorf("CLIENT LIST = %#v", s)
	}
	if v := c.Do("ECHO"); v != testkit.Error("ERR wrong number of arguments for 'echo' command") {
		t.Errorf("ECHO without args = %#v", v)
	}
}

func isErrPrefix(v any, prefix string) bool {
	e, ok := v.(testkit.Error)
	return ok && strings.HasPrefix(string(e), prefix)
}

func isEmptyAggregate(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case map[any]any:
		return len(x) == 0
	}
	return false
}
