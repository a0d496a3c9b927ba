package relay

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// realBackends starts n redis-servers (miniredis has no CLIENT TRACKING)
// and returns nodes dialled to them; skipped under -short.
func realBackends(t *testing.T, n int) []*backend.RedisNode {
	t.Helper()
	if testing.Short() {
		t.Skip("needs redis-server (CLIENT TRACKING): skipped under -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("needs redis-server (CLIENT TRACKING): not in PATH")
	}
	var nodes []*backend.RedisNode
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_, port, _ := net.SplitHostPort(addr)
		l.Close()
		cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		testkit.Eventually(t, 10*time.Second, "redis-server on "+addr, func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		node, err := backend.DialNodeTLS(addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Close() })
		nodes = append(nodes, node)
	}
	return nodes
}

// keyInbox collects a watcher's invalidations.
type keyInbox struct {
	mu  sync.Mutex
	got [][]string
}

func (b *keyInbox) invalidate(keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, slices.Clone(keys))
}

func (b *keyInbox) take() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := b.got
	b.got = nil
	return got
}

// TestOwnCommand: a NOLOOP client's own command that reads a key and may
// write it (BeginOwn, End). A lock attempt that finds the key held leaves
// it tracked, so the release wakes the client, even a release made while
// the attempt ran; a change of the value by the command itself is
// reported, a change of the ttl alone is not.
func TestOwnCommand(t *testing.T) {
	nodes := realBackends(t, 3)
	var bs []Backend
	for _, n := range nodes {
		bs = append(bs, n)
	}
	r := New(Options{Backends: bs, Logger: redlocktest.Logger(t), ConfirmWait: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
	})
	ctx := context.Background()
	everywhere := func(args ...any) {
		t.Helper()
		for _, n := range nodes {
			if _, err := n.Do(ctx, args...); err != nil && err.Error() != "redis: nil" {
				t.Fatalf("%v on %s: %v", args, n.Addr(), err)
			}
		}
	}
	var inbox keyInbox
	w := r.NewWatcher(inbox.invalidate)
	t.Cleanup(w.Close)
	own := func(args ...any) {
		t.Helper()
		o, err := w.BeginOwn(ctx, []string{"k"})
		if err != nil {
			t.Fatal(err)
		}
		everywhere(args...)
		if covered, err := o.End(ctx); err != nil || !covered {
			t.Fatalf("End = %v, %v; want covered", covered, err)
		}
	}
	wantNothing := func(what string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		if got := inbox.take(); len(got) != 0 {
			t.Fatalf("%s: invalidated %v, want nothing", what, got)
		}
	}
	wantK := func(what string) {
		t.Helper()
		testkit.Eventually(t, 5*time.Second, what, func() bool {
			got := inbox.take()
			if len(got) > 1 {
				t.Fatalf("%s: invalidated %v, want once", what, got)
			}
			return len(got) == 1 && slices.Equal(got[0], []string{"k"})
		})
	}

	everywhere("SET", "k", "holder", "PX", "60000")
	own("SET", "k", "mine", "NX", "PX", "60000") // held: writes nothing
	wantNothing("a lock attempt that found the key held")
	everywhere("DEL", "k")
	wantK("the release after the attempt")

	own("SET", "k", "mine", "NX", "PX", "60000") // free: takes it
	wantK("the command's own change of the value")
	own("PEXPIRE", "k", "30000")
	wantNothing("the command's own change of the ttl")
	everywhere("SET", "k", "thief")
	wantK("another client's change after the own commands")

	// A release while the attempt runs (after its first read) is not lost.
	everywhere("SET", "k", "holder", "PX", "60000")
	o, err := w.BeginOwn(ctx, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	everywhere("SET", "k", "mine", "NX", "PX", "60000")
	everywhere("DEL", "k")
	if _, err := o.End(ctx); err != nil {
		t.Fatal(err)
	}
	wantK("a release while the attempt ran")
}
