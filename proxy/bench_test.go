package proxy

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// BenchmarkGuardScan runs the input guard's frame scanner over a typical
// pipelined stream, 64 LOCK/UNLOCK pairs, taking the released bytes as
// guardConn.Read does.
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
	p := make([]byte, 16<<10)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.scan(stream); err != nil {
			b.Fatal(err)
		}
		for s.take(p) > 0 {
		}
	}
}
