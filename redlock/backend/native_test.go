package backend

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

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
			f, addr := testkit.StartFakeRedis(t, tc.info)
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
			cmds := f.Received()
			if testkit.Count(cmds, tc.cmd) != 3 || testkit.Count(cmds, "EVALSHA") != 0 || testkit.Count(cmds, "EVAL") != 0 {
				t.Fatalf("backend received %v; want 3 × %s and no scripts", cmds, tc.cmd)
			}

			// A downgraded server: the unknown command falls back to the
			// script within the same call and clears the capability.
			f.SetNative(false)
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
			cmds = f.Received()
			if testkit.Count(cmds, tc.cmd) != 4 || testkit.Count(cmds, "EVALSHA") != 2 {
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
	if testkit.Count(cmds, "EVALSHA") != 2 || testkit.Count(cmds, "DELEX") != 0 || testkit.Count(cmds, "DELIFEQ") != 0 {
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
	c := &Command{Kind: CallCAD, Keys: []string{"k"}, Value: "v"}
	st := n.firstStep(c)
	if st != stepNative {
		t.Fatalf("first step %d, want native", st)
	}
	n.native.Store(int32(nativeNone)) // the new connection's INFO
	b, sent := n.encode(nil, c, st)
	if sent != stepSHA || !strings.Contains(string(b), "EVALSHA") {
		t.Fatalf("encoded %q at step %d, want EVALSHA at stepSHA", b, sent)
	}
	_, err, next, again := n.finish(c, sent, nil, resp.Error("NOSCRIPT No matching script."))
	if !again || next != stepSource || err != nil {
		t.Fatalf("after NOSCRIPT: again=%v next=%d err=%v, want EVAL next", again, next, err)
	}
}
