package proxy

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// BenchmarkGuardScan runs the input guard's frame scanner over a typical
// pipelined stream, 64 LOCK/UNLOCK pairs, taking each command's arguments
// as the commandReader does.
func BenchmarkGuardScan(b *testing.B) {
	var stream []byte
	for i := range 64 {
		key := "orders:" + strconv.Itoa(i)
		stream = testkit.AppendCmd(stream, "LOCK", key, "30000")
		stream = testkit.AppendCmd(stream, "UNLOCK", key, "NdGx3kR2c8yJb0mQw7Zt1A")
	}
	var authed atomic.Bool
	authed.Store(true)
	auth, pre := scanLimits(Limits{})
	s := newFrameScanner(&authed, auth, pre)
	var args [][]byte
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.feed(stream); err != nil {
			b.Fatal(err)
		}
		for {
			_, a, ok := s.next(args)
			if !ok {
				break
			}
			args = a
		}
		s.idle()
	}
}

// BenchmarkObserveParallel is what one lock operation reports to the
// metrics (one command, five backend calls), from 64 goroutines at once.
func BenchmarkObserveParallel(b *testing.B) {
	m := NewMetrics("bench")
	addrs := []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379", "10.0.0.5:6379"}
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			for _, a := range addrs {
				m.ObserveBackend(a, time.Millisecond, nil)
			}
			m.Observe("lock", "native", commands.ResultOK, time.Millisecond)
		}
	})
}
