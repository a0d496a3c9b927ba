package redlock

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeyGateSerialisesAndForgets(t *testing.T) {
	var g keyGate
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := []string{"a", "b"}
			if i%2 == 1 {
				keys = []string{"b", "a", "b"} // other order, duplicate: no deadlock
			}
			pass, err := g.enter(context.Background(), keys)
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			pass.leave()
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d acquisitions of one key ran at once", maxInside.Load())
	}
	if len(g.m) != 0 {
		t.Fatalf("gate keeps %d entries after everyone left", len(g.m))
	}
}

func TestKeyGateHonoursContext(t *testing.T) {
	var g keyGate
	pass, _ := g.enter(context.Background(), []string{"k"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.enter(ctx, []string{"j", "k"}); err == nil {
		t.Fatal("entered a busy key")
	}
	pass.leave()
	if len(g.m) != 0 {
		t.Fatalf("gate keeps %d entries", len(g.m))
	}
	pass2, err := g.enter(context.Background(), []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	pass2.leave()
}

// BenchmarkKeyGateParallel is the gate on distinct keys from 64 goroutines
// sharing one cancellable context, as the proxy's commands share the
// server's.
func BenchmarkKeyGateParallel(b *testing.B) {
	var g keyGate
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		keys := []string{"k" + strconv.FormatInt(next.Add(1), 10)}
		for pb.Next() {
			p, err := g.enter(ctx, keys)
			if err != nil {
				b.Error(err)
				return
			}
			p.leave()
		}
	})
}
