package tests

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestClientTimeouts: the daemon's idle_timeout and write_timeout, whose
// socket deadlines are moved lazily (at most once per half timeout on a
// busy connection), still close a client that went quiet after a busy
// spell of locks, and a client that stops reading its replies. The idle
// timeout is 2 s so that a loaded machine's pause between two commands of
// the busy spell does not end it early.
func TestClientTimeouts(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "idle_timeout = \"2s\"\nwrite_timeout = \"1s\"")

	t.Run("idle after a busy spell", func(t *testing.T) {
		c := testkit.Dial(t, p.Addr())
		for i := range 50 {
			held, ok := c.Do("LOCK", "idle:k", "10000").([]any)
			if !ok || len(held) != 3 {
				t.Fatalf("LOCK %d = %#v", i, held)
			}
			if got := c.Do("UNLOCK", "idle:k", held[0].(string)); got != int64(1) {
				t.Fatalf("UNLOCK %d = %#v", i, got)
			}
		}
		c.ExpectClosed(10 * time.Second)
	})

	t.Run("stalled reader", func(t *testing.T) {
		setup := testkit.Dial(t, p.Addr())
		if got := setup.Do("SET", "timeouts:big", strings.Repeat("x", 4000), "PX", "60000"); got != "OK" {
			t.Fatalf("SET = %#v", got)
		}
		nc, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		for i := range 50 { // replies read: the write deadline is set and fresh
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			_, werr := nc.Write([]byte("PING\r\n"))
			line, rerr := r.ReadString('\n')
			if werr != nil || rerr != nil || line != "+PONG\r\n" {
				t.Fatalf("PING %d: %q, %v, %v", i, line, werr, rerr)
			}
		}
		var chunk []byte
		for range 100 {
			chunk = testkit.AppendCmd(chunk, "GET", "timeouts:big")
		}
		// Replies never read: once the socket buffers are full the proxy's
		// write is stuck, and within 1.5 s it gives up and closes; then
		// this side's writes fail.
		start := time.Now()
		for time.Since(start) < 30*time.Second {
			_ = nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := nc.Write(chunk); err != nil {
				return
			}
		}
		t.Fatal("the proxy still reads a client that has not read its replies for 30 s")
	})
}
