package backend

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
)

// cycleReplies is what one lock cycle's commands get back from a backend:
// SET NX PX's +OK, the compare-and-delete's :1, a GET's bulk string and a
// small array (an EVAL's [1, "token"]).
const cycleReplies = "+OK\r\n:1\r\n$24\r\nfa83a2d7c0e5b1946c1e0a3f\r\n*2\r\n:1\r\n$5\r\ntoken\r\n"

// loopReader serves b over and over.
type loopReader struct {
	b   []byte
	off int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.b[r.off:])
		n += c
		r.off = (r.off + c) % len(r.b)
	}
	return n, nil
}

// BenchmarkCodecRead reads a lock cycle's four replies per op.
func BenchmarkCodecRead(b *testing.B) {
	br := bufio.NewReaderSize(&loopReader{b: []byte(cycleReplies)}, 16<<10)
	b.ReportAllocs()
	for b.Loop() {
		for range 4 {
			if _, err := readReply(br); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCodecEncode encodes a SET NX PX and a generic command per op.
func BenchmarkCodecEncode(b *testing.B) {
	buf := make([]byte, 0, 256)
	args := []any{"SET", "lock:orders", []byte("fa83a2d7c0e5b1946c1e0a3f"), "PX", int64(30000)}
	b.ReportAllocs()
	for b.Loop() {
		buf = resp.AppendCommand(buf[:0], args...)
		buf = resp.AppendBulk(buf, "lock:orders")
		buf = resp.AppendBulkInt(buf, 30000)
	}
	if !bytes.HasPrefix(buf, []byte("*5\r\n$3\r\nSET\r\n")) {
		b.Fatal("bad encoding")
	}
}
