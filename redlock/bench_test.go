package redlock

import (
	"context"
	"strconv"
	"testing"
	"time"
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
