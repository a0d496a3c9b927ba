package commands

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// newTestDispatcher serves over n in-process miniredis backends.
func newTestDispatcher(t testing.TB, n int, pass string) (*Dispatcher, []*miniredis.Miniredis) {
	t.Helper()
	return newDispatcherLog(t, n, pass, redlocktest.Logger(t))
}

// newDispatcherLog is newTestDispatcher with its log going to logger. The
// dispatcher is shut down when the test ends: its SESSION locks released,
// its background work waited for.
func newDispatcherLog(t testing.TB, n int, pass string, logger hclog.Logger) (*Dispatcher, []*miniredis.Miniredis) {
	t.Helper()
	rl, mrs := redlocktest.New(t, n, redlock.Options{Logger: logger})
	d := New(Options{
		Leases: lease.New(lease.Options{Locker: rl, Logger: logger, KeepTTL: 30 * time.Second}),
		MinTTL: 10 * time.Millisecond, MaxTTL: 60 * time.Second, MaxWait: 2 * time.Second,
		RequirePass: pass, Version: "test", Logger: logger,
	})
	shutdownAtEnd(t, d)
	return d, mrs
}

// shutdownAtEnd shuts d down when the test ends, before its Redlock closes.
func shutdownAtEnd(t testing.TB, d *Dispatcher) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.leases.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
}

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

// do runs a command and returns its RESP encoding for the client's protocol.
func do(d *Dispatcher, c *Client, s ...string) string {
	return string(AppendReply(nil, d.Do(context.Background(), c, args(s...)), c.Proto()))
}

func TestTableIsWellFormed(t *testing.T) {
	for _, c := range served {
		if c.Name != strings.ToUpper(c.Name) || (c.run == nil) == (c.runKeys == nil) || c.Summary == "" || c.Group == "" || c.Arity == 0 {
			t.Errorf("row %q is incomplete", c.Name)
		}
		if c.NumKeys > 0 && c.keys == nil {
			t.Errorf("row %q counts its keys (NumKeys) but parses none (keys)", c.Name)
		}
	}
	d := &Dispatcher{index: commandIndex}
	for _, name := range []string{"lock", "Lock", "LOCK", "lOcK"} {
		if d.lookup([]byte(name)) == nil {
			t.Errorf("lookup(%q) failed", name)
		}
	}
	if d.lookup([]byte(strings.Repeat("x", 100))) != nil {
		t.Error("long name found")
	}
}

func TestAppendReply(t *testing.T) {
	tests := []struct {
		r      Reply
		v2, v3 string
	}{
		{OK, "+OK\r\n", "+OK\r\n"},
		{Error("ERR a\r\nb"), "-ERR a  b\r\n", "-ERR a  b\r\n"},
		{Int(-7), ":-7\r\n", ":-7\r\n"},
		{Bulk("a\r\nb"), "$4\r\na\r\nb\r\n", "$4\r\na\r\nb\r\n"},
		{BulkString(""), "$0\r\n\r\n", "$0\r\n\r\n"},
		{Null{}, "$-1\r\n", "_\r\n"},
		{NullArray{}, "*-1\r\n", "_\r\n"},
		{nil, "$-1\r\n", "_\r\n"},
		{Array{Int(1), Null{}}, "*2\r\n:1\r\n$-1\r\n", "*2\r\n:1\r\n_\r\n"},
		{Map{{"a", Int(1)}}, "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n$1\r\na\r\n:1\r\n"},
		{Map{}, "*0\r\n", "%0\r\n"},
	}
	for _, tt := range tests {
		if got := string(AppendReply(nil, tt.r, 2)); got != tt.v2 {
			t.Errorf("RESP2 %#v = %q, want %q", tt.r, got, tt.v2)
		}
		if got := string(AppendReply(nil, tt.r, 3)); got != tt.v3 {
			t.Errorf("RESP3 %#v = %q, want %q", tt.r, got, tt.v3)
		}
	}
}

func TestDispatchErrors(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"foo", "a", "b"}, "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"},
		{[]string{"FOO"}, "-ERR unknown command 'FOO', with args beginning with: \r\n"},
		{[]string{"lock"}, "-ERR wrong number of arguments for 'lock' command\r\n"},
		{[]string{"UNLOCK", "k"}, "-ERR wrong number of arguments for 'unlock' command\r\n"},
		{[]string{"lock", "k", "abc"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"lock", "k", "5"}, "-ERR ttl 5 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"lock", "k", "60001"}, "-ERR ttl 60001 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"lock", "k", "100", "WAIT"}, "-ERR syntax error\r\n"},
		{[]string{"lock", "k", "100", "WAIT", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"lock", "k", "100", "BOGUS"}, "-ERR syntax error\r\n"},
		{[]string{"lock", "k", "100", "TOKEN", ""}, "-ERR TOKEN must not be empty\r\n"},
		{[]string{"lock", strings.Repeat("k", 1025), "100"}, "-ERR key is too long (max 1024 bytes)\r\n"},
		{[]string{"extend", "k", "t", "1"}, "-ERR ttl 1 is out of range: must be between 10 and 60000 ms\r\n"},
		{[]string{"select", "1"}, "-ERR DB index is out of range\r\n"},
		{[]string{"select", "0"}, "+OK\r\n"},
		{[]string{"cluster", "nodes"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"client", "bogus"}, "-ERR unknown subcommand 'bogus'. Try CLIENT HELP.\r\n"},
		{[]string{"client", "setname", "a b"}, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{[]string{"client", "getname", "x"}, "-ERR wrong number of arguments for 'client|getname' command\r\n"},
		{[]string{"auth", "x"}, "-" + string(errAuthNoPass) + "\r\n"},
		{[]string{"hello", "4"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"hello", "x"}, "-ERR Protocol version is not an integer or out of range\r\n"},
		{[]string{"hello", "3", "bogus"}, "-ERR Syntax error in HELLO option 'bogus'\r\n"},
		{[]string{"echo", "a\x00\xff"}, "$3\r\na\x00\xff\r\n"},
		{[]string{"ping"}, "+PONG\r\n"},
		{[]string{"ping", "hi"}, "$2\r\nhi\r\n"},
		{[]string{"config", "get", "timeout"}, "*0\r\n"},
		{[]string{"dbsize"}, ":0\r\n"},
	}
	for _, tt := range tests {
		if got := do(d, c, tt.in...); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAuthFlow(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "s3cret")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	steps := []struct {
		in   []string
		want string
	}{
		{[]string{"PING"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"nosuch"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"HELLO", "3"}, "-" + string(errHelloNoAuth) + "\r\n"},
		{[]string{"AUTH", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"AUTH", "other", "s3cret"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"AUTH", "s3cret"}, "+OK\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"RESET"}, "+RESET\r\n"},
		{[]string{"PING"}, "-NOAUTH Authentication required.\r\n"},
	}
	for _, s := range steps {
		if got := do(d, c, s.in...); got != s.want {
			t.Fatalf("%q = %q, want %q", s.in, got, s.want)
		}
	}
	got := do(d, c, "HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "app")
	if !strings.HasPrefix(got, "%7\r\n") || !strings.Contains(got, "proto\r\n:3") || c.Proto() != 3 || c.Name() != "app" {
		t.Fatalf("HELLO 3 AUTH = %q (proto %d, name %q)", got, c.Proto(), c.Name())
	}
	if got := do(d, c, "CLIENT", "GETNAME"); got != "$3\r\napp\r\n" {
		t.Fatalf("GETNAME = %q", got)
	}
}

func TestLockUnlockExtend(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	ctx := context.Background()
	r := d.Do(ctx, c, args("LOCK", "res", "5000"))
	a, ok := r.(Array)
	if !ok || len(a) != 3 {
		t.Fatalf("LOCK = %#v", r)
	}
	token := string(a[0].(BulkString))
	if v := a[1].(Int); v <= 0 || v > 5000 {
		t.Fatalf("validity %d", v)
	}
	if _, ok := a[2].(Null); !ok {
		t.Fatalf("fence = %#v, want null", a[2])
	}
	holding := 0
	for _, m := range mrs {
		if got, _ := m.Get("res"); got == token {
			holding++
		}
	}
	if holding < 3 {
		t.Fatalf("%d backends hold the token, want a quorum", holding)
	}
	if got := do(d, c, "LOCK", "res", "5000"); got != "*-1\r\n" {
		t.Fatalf("second LOCK = %q, want null array", got)
	}
	if got := do(d, c, "EXTEND", "res", token, "9000"); !strings.HasPrefix(got, ":") || got == ":0\r\n" {
		t.Fatalf("EXTEND = %q", got)
	}
	extended := 0
	for _, m := range mrs {
		if m.TTL("res") > 5*time.Second {
			extended++
		}
	}
	if extended < 3 {
		t.Fatalf("EXTEND reached %d backends, want a quorum", extended)
	}
	if got := do(d, c, "UNLOCK", "res", "wrong"); got != ":0\r\n" {
		t.Fatalf("UNLOCK wrong token = %q", got)
	}
	if got := do(d, c, "UNLOCK", "res", token); got != ":1\r\n" {
		t.Fatalf("UNLOCK = %q", got)
	}
	if got := do(d, c, "EXTEND", "res", token, "9000"); got != "$-1\r\n" {
		t.Fatalf("EXTEND after UNLOCK = %q", got)
	}
	if got := do(d, c, "LOCK", "res", "5000", "TOKEN", "mine"); !strings.HasPrefix(got, "*3\r\n$4\r\nmine\r\n") {
		t.Fatalf("LOCK TOKEN = %q", got)
	}
	do(d, c, "UNLOCK", "res", "mine")
	var last int64
	for range 3 {
		a, ok := d.Do(ctx, c, args("LOCK", "res", "5000", "FENCE")).(Array)
		if !ok {
			t.Fatal("LOCK FENCE failed")
		}
		fence, ok := a[2].(Int)
		if !ok || int64(fence) <= last {
			t.Fatalf("fence %#v after %d", a[2], last)
		}
		last = int64(fence)
		do(d, c, "UNLOCK", "res", string(a[0].(BulkString)))
	}
	if got := do(d, c, "SET", "redlock-proxy:fence", "1"); got != "-"+string(errReservedKey)+"\r\n" {
		t.Fatalf("SET of the fence key = %q", got)
	}
}

func TestLockWait(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	a, ok := d.Do(context.Background(), c, args("LOCK", "w", "10000")).(Array)
	if !ok {
		t.Fatal("LOCK failed")
	}
	start := time.Now()
	if got := do(d, c, "LOCK", "w", "10000", "WAIT", "50"); got != "*-1\r\n" {
		t.Fatalf("short WAIT = %q", got)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("WAIT 50 returned after %v", el)
	}
	// The holder unlocks once the waiter is queued: the waiter gets it.
	waited := make(chan string, 1)
	go func() { waited <- do(d, c, "LOCK", "w", "10000", "WAIT", "2000") }()
	testkit.Eventually(t, 5*time.Second, "the waiter to queue", func() bool { return d.leases.Waiters() == 1 })
	do(d, d.NewClient("127.0.0.1:3", "127.0.0.1:2"), "UNLOCK", "w", string(a[0].(BulkString)))
	if got := <-waited; !strings.HasPrefix(got, "*3") {
		t.Fatalf("long WAIT = %q", got)
	}
	// WAIT beyond max_wait (2 s here) is capped, not refused.
	start = time.Now()
	if got := do(d, c, "LOCK", "w", "10000", "WAIT", "999999"); got != "*-1\r\n" {
		t.Fatalf("capped WAIT = %q", got)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("WAIT not capped by max_wait: %v", el)
	}
}

func TestLockNoQuorum(t *testing.T) {
	d, mrs := newTestDispatcher(t, 5, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	for _, m := range mrs[:3] {
		m.Close()
	}
	got := do(d, c, "LOCK", "q", "10000")
	if !strings.HasPrefix(got, "-NOQUORUM only ") || !strings.Contains(got, "of 5 backends answered, need 3") {
		t.Fatalf("LOCK with 3 of 5 down = %q", got)
	}
	if strings.Contains(got, "127.0.0.1") {
		t.Fatalf("node error leaked: %q", got)
	}
}

func TestClientCommands(t *testing.T) {
	d, _ := newTestDispatcher(t, 1, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	other := d.NewClient("127.0.0.1:3", "127.0.0.1:2")
	if got := do(d, c, "CLIENT", "ID"); got != ":1\r\n" {
		t.Fatalf("CLIENT ID = %q", got)
	}
	do(d, c, "CLIENT", "SETINFO", "LIB-NAME", "go-redis")
	list := do(d, c, "CLIENT", "LIST")
	if !strings.Contains(list, "id=1 ") || !strings.Contains(list, "id=2 ") || !strings.Contains(list, "lib-name=go-redis") {
		t.Fatalf("CLIENT LIST = %q", list)
	}
	d.CloseClient(other)
	if d.ClientCount() != 1 {
		t.Fatalf("count = %d", d.ClientCount())
	}
	info := do(d, c, "INFO")
	for _, want := range []string{"redis_version:", "loading:0", "role:master", "redis_mode:standalone", "# Backends", "quorum:1", "connected_clients:1"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	if got := do(d, c, "INFO", "replication"); strings.Contains(got, "# Server") || !strings.Contains(got, "role:master") {
		t.Errorf("INFO replication = %q", got)
	}
	if got := do(d, c, "COMMAND", "COUNT"); got != ":"+strconv.Itoa(len(served))+"\r\n" {
		t.Errorf("COMMAND COUNT = %q", got)
	}
	if got := do(d, c, "COMMAND", "INFO", "lock", "nosuch"); !strings.HasPrefix(got, "*2\r\n*10\r\n$4\r\nlock\r\n:-3\r\n") || !strings.HasSuffix(got, "$-1\r\n") { // as Redis 7: a null bulk string
		t.Errorf("COMMAND INFO = %q", got)
	}
	if got := do(d, c, "QUIT"); got != "+OK\r\n" || !c.CloseRequested() {
		t.Errorf("QUIT = %q", got)
	}
}

// Do runs one command as the server would without a plan: look up, check
// arity, check auth, check the user's permissions, run. args[0] is the
// command name in any case. The server plans first and runs DoPlanned.
func (d *Dispatcher) Do(ctx context.Context, c *Client, args [][]byte) Reply {
	if len(args) == 0 {
		return nil
	}
	return d.run(ctx, c, d.lookup(args[0]), args, parsedCall{})
}
