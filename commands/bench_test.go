package commands

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/backend"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// Allocation benchmarks for the per-command hot path; run with
// go test -run '^$' -bench . -benchmem ./commands.

// newBenchDispatcher serves over n in-process miniredis nodes, with the
// log discarded (a benchmark must not measure log formatting).
func newBenchDispatcher(b *testing.B, n int) *Dispatcher {
	b.Helper()
	d, _ := newDispatcherLog(b, n, "", hclog.NewNullLogger())
	return d
}

func BenchmarkParseLock(b *testing.B) {
	d := New(Options{MinTTL: 1, MaxTTL: 1 << 62, MaxWait: 1 << 62})
	a := args("LOCK", "orders:42", "30000", "wait", "500", "TOKEN", "my-token-0123456789abcdef", "fence")
	b.ReportAllocs()
	for b.Loop() {
		if _, r := d.parseLock(a); r != nil {
			b.Fatal(r)
		}
	}
}

func BenchmarkDispatchPing(b *testing.B) {
	d := New(Options{})
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	a := args("PING")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := d.Do(ctx, c, a); r != Simple("PONG") {
			b.Fatal(r)
		}
	}
}

// BenchmarkDispatchLockUnlock is a full in-process acquire and release:
// Dispatcher.Do of LOCK then UNLOCK over 5 miniredis nodes. Most of its
// allocations are miniredis's (server side, Lua), counted because it runs
// in the same process.
func BenchmarkDispatchLockUnlock(b *testing.B) {
	benchLockUnlock(b, newBenchDispatcher(b, 5))
}

// BenchmarkDispatchLockUnlockMem is the same over 5 pipelined nodes whose
// backends are canned responders that allocate nothing, so that what it
// counts is the proxy's own work per lock cycle: commands and redlock.
func BenchmarkDispatchLockUnlockMem(b *testing.B) {
	nodes := make([]redlock.Node, 5)
	for i := range nodes {
		n, err := backend.DialNodeTLS(testkit.Canned(b), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
	}
	rl := redlock.New(nodes, redlock.Options{NodeTimeout: 200 * time.Millisecond})
	b.Cleanup(func() { rl.Close(context.Background()) })
	benchLockUnlock(b, New(Options{Leases: lease.New(lease.Options{Locker: rl}), MinTTL: time.Millisecond, MaxTTL: time.Minute}))
}

func benchLockUnlock(b *testing.B, d *Dispatcher) {
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	ctx := context.Background()
	lock := args("LOCK", "bench:lock", "10000")
	unlock := args("UNLOCK", "bench:lock", "")
	b.ReportAllocs()
	for b.Loop() {
		r, ok := d.Do(ctx, c, lock).(Array)
		if !ok {
			b.Fatalf("LOCK = %#v", r)
		}
		unlock[2] = []byte(r[0].(BulkString))
		if r := d.Do(ctx, c, unlock); r != Int(1) {
			b.Fatalf("UNLOCK = %#v", r)
		}
	}
}

func BenchmarkAppendReply(b *testing.B) {
	// A Reply, as handlers return it: converting the Array in the loop
	// would count an allocation the proxy does not make here.
	var reply Reply = Array{BulkString("NdGx3kR2c8yJb0mQw7Zt1A"), Int(9899), Int(42)}
	for _, proto := range []int{2, 3} {
		b.Run("RESP"+strconv.Itoa(proto), func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendReply(buf[:0], reply, proto)
			}
		})
	}
}

// BenchmarkDispatchKeyed is a keyed command outside a script (SADD, then
// SISMEMBER) by vote over 5 miniredis nodes, for comparison with
// BenchmarkDispatchLockUnlock: the same one round of EVALSHA per command.
func BenchmarkDispatchKeyed(b *testing.B) {
	d := newBenchDispatcher(b, 5)
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	add, is := args("SADD", "bench:s", "m"), args("SISMEMBER", "bench:s", "m")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := d.Do(ctx, c, add).(Int); !ok {
			b.Fatal("SADD failed")
		}
		if r := d.Do(ctx, c, is); r != Int(1) {
			b.Fatal(r)
		}
	}
}
