package redlock

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/tidwall/redcon"
)

// fakeBackend is a small Redis over a map that answers INFO with a chosen
// version, PING, SET (NX, IFEQ, PX), GET, DELEX key IFEQ value and
// DELIFEQ key value with their real semantics, and EVALSHA of delScript;
// it records every command name it receives. Without native, DELEX and
// DELIFEQ are unknown commands (a downgraded server).
type fakeBackend struct {
	info string

	mu     sync.Mutex
	keys   map[string]string
	cmds   []string
	native bool
	hold   chan struct{} // non-nil: commands other than INFO wait for it to close
}

func startFakeBackend(t *testing.T, info string) (*fakeBackend, string) {
	t.Helper()
	f := &fakeBackend{info: info, keys: map[string]string{}, native: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = redcon.Serve(ln, f.handle, nil, nil)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return f, ln.Addr().String()
}

func (f *fakeBackend) setNative(on bool) {
	f.mu.Lock()
	f.native = on
	f.mu.Unlock()
}

// received returns the command names received so far, upper-cased.
func (f *fakeBackend) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

// stall makes commands other than INFO wait until the returned function
// is called; each connection then runs its waiting commands in order.
func (f *fakeBackend) stall() (resume func()) {
	hold := make(chan struct{})
	f.mu.Lock()
	f.hold = hold
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.hold = nil
		f.mu.Unlock()
		close(hold)
	}
}

// value returns key's value, "" when absent.
func (f *fakeBackend) value(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key]
}

func (f *fakeBackend) handle(c redcon.Conn, cmd redcon.Command) {
	name := strings.ToUpper(string(cmd.Args[0]))
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil && name != "INFO" {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, name)
	arg := func(i int) string { return string(cmd.Args[i]) }
	compareAndDelete := func(key, value string) {
		if v, ok := f.keys[key]; ok && v == value {
			delete(f.keys, key)
			c.WriteInt(1)
			return
		}
		c.WriteInt(0)
	}
	switch {
	case name == "INFO":
		c.WriteBulkString(f.info)
	case name == "PING":
		c.WriteString("PONG")
	case name == "GET" && len(cmd.Args) == 2:
		if v, ok := f.keys[arg(1)]; ok {
			c.WriteBulkString(v)
		} else {
			c.WriteNull()
		}
	case name == "SET" && len(cmd.Args) >= 3:
		key, value := arg(1), arg(2)
		cur, exists := f.keys[key]
		for i := 3; i < len(cmd.Args); i++ {
			switch strings.ToUpper(arg(i)) {
			case "NX":
				if exists {
					c.WriteNull()
					return
				}
			case "IFEQ":
				i++
				if !exists || cur != arg(i) {
					c.WriteNull()
					return
				}
			case "PX":
				i++ // ttls are not modelled
			}
		}
		f.keys[key] = value
		c.WriteString("OK")
	case name == "DELEX" && f.native && len(cmd.Args) == 4 && strings.EqualFold(arg(2), "IFEQ"):
		compareAndDelete(arg(1), arg(3))
	case name == "DELIFEQ" && f.native && len(cmd.Args) == 3:
		compareAndDelete(arg(1), arg(2))
	case name == "EVALSHA" && len(cmd.Args) == 6 && arg(1) == delScript.Hash():
		compareAndDelete(arg(3), arg(5)) // the key, its marker, the value
	case name == "EVALSHA" && len(cmd.Args) == 8 && arg(1) == acquireOneScript.Hash():
		if _, exists := f.keys[arg(3)]; exists { // the key, its companion and marker, value, ttl
			c.WriteInt(0)
			return
		}
		f.keys[arg(3)] = arg(6)
		c.WriteInt(1)
	default:
		c.WriteError("ERR unknown command '" + arg(0) + "', with args beginning with: ")
	}
}

// count returns how many of cmds are name.
func count(cmds []string, name string) int {
	n := 0
	for _, c := range cmds {
		if c == name {
			n++
		}
	}
	return n
}

func TestParseInfoNative(t *testing.T) {
	for _, tc := range []struct {
		info string
		want nativeCAD
	}{
		{"redis_version:7.4.2\r\n", nativeNone},
		{"redis_version:8.2.1\r\n", nativeNone},
		{"redis_version:8.4.0\r\n", nativeDelex},
		{"redis_version:8.10.0\r\n", nativeDelex},
		{"redis_version:9.0.0\r\n", nativeDelex},
		{"redis_version:7.2.4\r\nvalkey_version:8.1.3\r\n", nativeNone},
		{"redis_version:7.2.4\r\nvalkey_version:9.0.0\r\n", nativeDelIfEq},
		{"valkey_version:10.1.0\r\nredis_version:7.2.4\r\n", nativeDelIfEq},
		{"redis_version:garbage\r\n", nativeNone},
		{"# Clients\r\nconnected_clients:1\r\n", nativeNone}, // miniredis
	} {
		if got := parseInfo(tc.info).native; got != tc.want {
			t.Errorf("%q: native %d, want %d", tc.info, got, tc.want)
		}
	}
}

func TestCompareAndDeleteNative(t *testing.T) {
	for _, tc := range []struct {
		name, info, cmd string
	}{
		{"redis 8.4", "# Server\r\nredis_version:8.4.0\r\n", "DELEX"},
		{"valkey 9", "# Server\r\nredis_version:7.2.4\r\nvalkey_version:9.0.0\r\n", "DELIFEQ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := startFakeBackend(t, tc.info)
			n, err := DialNode(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := n.Do(ctx, "SET", "k", "v", "PX", 1000); err != nil {
				t.Fatalf("SET = %v", err)
			}
			for _, step := range []struct {
				value string
				want  bool
			}{{"w", false}, {"v", true}, {"v", false}} {
				if ok, err := n.CompareAndDelete(ctx, "k", step.value); ok != step.want || err != nil {
					t.Fatalf("CompareAndDelete(%q) = %v, %v; want %v", step.value, ok, err, step.want)
				}
			}
			cmds := f.received()
			if count(cmds, tc.cmd) != 3 || count(cmds, "EVALSHA") != 0 || count(cmds, "EVAL") != 0 {
				t.Fatalf("backend received %v; want 3 × %s and no scripts", cmds, tc.cmd)
			}

			// A downgraded server: the unknown command falls back to the
			// script within the same call and clears the capability.
			f.setNative(false)
			if _, err := n.Do(ctx, "SET", "k", "v", "PX", 1000); err != nil {
				t.Fatalf("SET = %v", err)
			}
			if ok, err := n.CompareAndDelete(ctx, "k", "v"); !ok || err != nil {
				t.Fatalf("CompareAndDelete after downgrade = %v, %v", ok, err)
			}
			if got := nativeCAD(n.native.Load()); got != nativeNone {
				t.Fatalf("capability %d after unknown command, want none", got)
			}
			if ok, err := n.CompareAndDelete(ctx, "k", "v"); ok || err != nil {
				t.Fatalf("CompareAndDelete absent = %v, %v", ok, err)
			}
			cmds = f.received()
			if count(cmds, tc.cmd) != 4 || count(cmds, "EVALSHA") != 2 {
				t.Fatalf("backend received %v; want one more %s, then EVALSHA twice", cmds, tc.cmd)
			}
		})
	}
}

func TestCompareAndDeleteRedis7(t *testing.T) {
	mr := miniredis.RunT(t)
	var mu sync.Mutex
	var cmds []string
	mr.Server().SetPreHook(func(_ *server.Peer, cmd string, _ ...string) bool {
		mu.Lock()
		cmds = append(cmds, strings.ToUpper(cmd))
		mu.Unlock()
		return false // run the command as usual
	})
	n, err := DialNode(mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	if _, err := n.Do(ctx, "SET", "k", "v", "PX", 1000); err != nil {
		t.Fatalf("SET = %v", err)
	}
	if got := nativeCAD(n.native.Load()); got != nativeNone {
		t.Fatalf("miniredis: capability %d, want none", got)
	}
	for _, want := range []bool{true, false} {
		if ok, err := n.CompareAndDelete(ctx, "k", "v"); ok != want || err != nil {
			t.Fatalf("CompareAndDelete = %v, %v; want %v", ok, err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if count(cmds, "EVALSHA") != 2 || count(cmds, "DELEX") != 0 || count(cmds, "DELIFEQ") != 0 {
		t.Fatalf("miniredis received %v; want EVALSHA twice and no native delete", cmds)
	}
}

// TestNativeGoneBeforeEncode: a compare-and-delete that chose the native
// command but is encoded after the capability went away (a reconnect to a
// downgraded server) goes out as EVALSHA and is known as such, so a
// NOSCRIPT reply (the restart emptied the script cache) moves on to EVAL
// instead of failing the call.
func TestNativeGoneBeforeEncode(t *testing.T) {
	n := &RedisNode{}
	n.native.Store(int32(nativeDelex))
	c := &command{kind: callCAD, keys: []string{"k"}, value: "v"}
	st := n.firstStep(c)
	if st != stepNative {
		t.Fatalf("first step %d, want native", st)
	}
	n.native.Store(int32(nativeNone)) // the new connection's INFO
	b, sent := n.encode(nil, c, st)
	if sent != stepSHA || !strings.Contains(string(b), "EVALSHA") {
		t.Fatalf("encoded %q at step %d, want EVALSHA at stepSHA", b, sent)
	}
	_, err, next, again := n.finish(c, sent, nil, RedisError("NOSCRIPT No matching script."))
	if !again || next != stepSource || err != nil {
		t.Fatalf("after NOSCRIPT: again=%v next=%d err=%v, want EVAL next", again, next, err)
	}
}
