package redlock

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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
	cpu0, w0 := processCPU(), processWrites()
	n := 0
	for b.Loop() {
		if _, err := r.Acquire(ctx, "bench", "tok", 10*time.Second); err != nil {
			b.Fatal(err)
		}
		if err := r.Release(ctx, "bench", "tok"); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/cycle")
	if w := processWrites(); w >= 0 && w0 >= 0 {
		b.ReportMetric(float64(w-w0)/float64(n), "writes/cycle")
	}
	_ = r.Close(ctx)
}

// BenchmarkAcquireReleasePipelined5Parallel is the same cycle from 64
// goroutines at once. It reports the process's CPU time and write system
// calls per cycle (the canned backends' share included: compare builds,
// not absolute figures).
func BenchmarkAcquireReleasePipelined5Parallel(b *testing.B) {
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
	var next atomic.Int64
	cpu0, w0 := processCPU(), processWrites()
	b.ResetTimer()
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		key := "bench" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() {
			if _, err := r.Acquire(ctx, key, "tok", 10*time.Second); err != nil {
				b.Error(err)
				return
			}
			if err := r.Release(ctx, key, "tok"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/cycle")
	if w := processWrites(); w >= 0 && w0 >= 0 {
		b.ReportMetric(float64(w-w0)/float64(b.N), "writes/cycle")
	}
	_ = r.Close(ctx)
}

// processCPU is this process's user and system time so far, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// processWrites is this process's write system calls so far (syscw of
// /proc/self/io), or -1 where there is none.
func processWrites() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}
