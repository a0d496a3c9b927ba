package redlock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

func BenchmarkAcquireRelease3(b *testing.B) { benchAcquireRelease(b, 3) }

func BenchmarkAcquireRelease5(b *testing.B) { benchAcquireRelease(b, 5) }

func benchAcquireRelease(b *testing.B, n int) {
	c := newCluster(b, n, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tok := strconv.Itoa(i)
		i++
		if _, err := c.r.Acquire(ctx, "bench", tok, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		if err := c.r.Release(ctx, "bench", tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcquireKeysRelease3(b *testing.B) { benchAcquireKeysRelease(b, 3) }

func BenchmarkAcquireKeysRelease5(b *testing.B) { benchAcquireKeysRelease(b, 5) }

func benchAcquireKeysRelease(b *testing.B, n int) {
	c := newCluster(b, n, Options{})
	ctx := context.Background()
	keys := []string{"bench-a", "bench-b"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.r.AcquireKeys(ctx, keys, "tok", 10*time.Second, IfAbsent); err != nil {
			b.Fatal(err)
		}
		if _, err := c.r.ReleaseKeys(ctx, keys, "tok"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead3(b *testing.B) { benchRead(b, 3) }

func BenchmarkRead5(b *testing.B) { benchRead(b, 5) }

func benchRead(b *testing.B, n int) {
	c := newCluster(b, n, Options{})
	ctx := context.Background()
	if err := c.r.Write(ctx, "bench", "v", 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.r.Read(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleasePipelined5 is an acquire and release over five
// pipelined RedisNodes (the proxy's path: no goroutine per node call)
// whose backends are canned responders that allocate nothing, so that
// allocs/op is this package's own work per lock cycle.
func BenchmarkAcquireReleasePipelined5(b *testing.B) {
	var nodes []Node
	for range 5 {
		n, err := DialNode(testkit.Canned(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	r := New(nodes, Options{NodeTimeout: time.Second})
	ctx := context.Background()
	if _, err := r.Acquire(ctx, "warm-up", "tok", time.Second); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Acquire(ctx, "bench", "tok", 10*time.Second); err != nil {
			b.Fatal(err)
		}
		if err := r.Release(ctx, "bench", "tok"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = r.Close(ctx)
}
