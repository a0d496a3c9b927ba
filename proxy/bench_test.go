package proxy

import (
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkGuardScan runs the input guard's frame scanner over a typical
// pipelined stream, 64 LOCK/UNLOCK pairs, taking the released bytes as
// guardConn.Read does.
func BenchmarkGuardScan(b *testing.B) {
	var stream []byte
	for i := range 64 {
		key := "orders:" + strconv.Itoa(i)
		stream = appendCmd(stream, "LOCK", key, "30000")
		stream = appendCmd(stream, "UNLOCK", key, "NdGx3kR2c8yJb0mQw7Zt1A")
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

// appendCmd encodes args as a RESP array of bulk strings.
func appendCmd(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
