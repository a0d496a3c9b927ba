package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// TestBadInput: hostile frames get "-ERR Protocol error: …" and a close; a
// truncated frame waits without stalling anyone; binary keys work; the
// process survives all of it.
func TestBadInput(t *testing.T) {
	t.Parallel()
	rs := startCluster(t, 3)
	p := startProxy(t, rs, "")

	protocolErrors := []struct {
		name  string
		frame string
		want  string
	}{
		{"huge multibulk count", "*9223372036854775807\r\n", "ERR Protocol error: invalid multibulk length"},
		{"multibulk count over max_args", "*2000000\r\n", "ERR Protocol error: invalid multibulk length"},
		{"huge bulk length", "*1\r\n$9223372036854775807\r\n", "ERR Protocol error: invalid bulk length"},
		{"bulk length over the limit", "*1\r\n$2000000000\r\n", "ERR Protocol error: invalid bulk length"},
		{"overflowing multibulk count", "*99999999999999999999999\r\n", "ERR Protocol error: invalid multibulk length"},
		{"non-numeric multibulk count", "*x\r\n", "ERR Protocol error: invalid multibulk length"},
		{"negative bulk length", "*1\r\n$-5\r\n", "ERR Protocol error: invalid bulk length"},
		{"no $ where a bulk is expected", "*1\r\nX\r\n", "ERR Protocol error: expected '$', got 'X'"},
		{"too big inline request", strings.Repeat("a", 100*1024) + "\r\n", "ERR Protocol error: too big inline request"},
	}
	for _, tc := range protocolErrors {
		t.Run(tc.name, func(t *testing.T) {
			c := testkit.Dial(t, p.Addr())
			c.Send([]byte(tc.frame))
			v, err := c.TryReadReply(5 * time.Second)
			if err != nil {
				t.Fatalf("sent %.80q: read error %v, want %q", tc.frame, err, tc.want)
			}
			if v != testkit.Error(tc.want) {
				t.Fatalf("sent %.80q: got %#v, want -%s", tc.frame, v, tc.want)
			}
			c.ExpectClosed(2 * time.Second)
		})
	}

	t.Run("too big inline request without newline", func(t *testing.T) {
		c := testkit.Dial(t, p.Addr())
		c.Send([]byte(strings.Repeat("b", 100*1024)))
		if v := c.ReadReply(); v != testkit.Error("ERR Protocol error: too big inline request") {
			t.Fatalf("100 KiB inline line without CRLF: got %#v, want -ERR Protocol error: too big inline request", v)
		}
		c.ExpectClosed(2 * time.Second)
	})

	t.Run("truncated frame waits", func(t *testing.T) {
		slow := testkit.Dial(t, p.Addr())
		slow.Send([]byte("*2\r\n$4\r\nLOCK\r\n$3\r\nab"))

		// Another connection is served meanwhile.
		ctx := testCtx(t, 10*time.Second)
		c := p.Client(nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r := mustLockNoFatal(ctx, c, "while-truncated")
			if r.err != nil {
				t.Errorf("LOCK while another connection holds a truncated frame: %v", r.err)
				return
			}
			if n, err := c.Do(ctx, "UNLOCK", "while-truncated", r.token).Int64(); err != nil || n != 1 {
				t.Errorf("UNLOCK while another connection holds a truncated frame = %d, %v", n, err)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("LOCK/UNLOCK stalled behind a truncated frame on another connection")
		}

		if v, err := slow.TryReadReply(300 * time.Millisecond); err == nil {
			t.Fatalf("truncated frame got a reply %#v, want the proxy to wait for the rest", v)
		}
		// The rest of the frame arrives: LOCK with one argument is an arity error.
		slow.Send([]byte("c\r\n"))
		if v := slow.ReadReply(); v != testkit.Error("ERR wrong number of arguments for 'lock' command") {
			t.Fatalf("completed frame LOCK abc = %#v, want the arity error", v)
		}
		if v := slow.Do("PING"); v != "PONG" {
			t.Fatalf("PING after the completed frame = %#v", v)
		}
	})

	t.Run("binary keys", func(t *testing.T) {
		ctx := testCtx(t, 10*time.Second)
		key := "bin\x00key\r\nwith\xffbytes"
		c := testkit.Dial(t, p.Addr())
		arr, ok := c.Do("LOCK", key, "10000").([]any)
		if !ok || len(arr) != 3 {
			t.Fatalf("LOCK of a binary key = %#v", arr)
		}
		tok, _ := arr[0].(string)
		if n := holders(ctx, t, rs, key, tok); n < 2 {
			t.Fatalf("binary key holds the token on %d of 3 backends, want at least 2", n)
		}
		if n := holders(ctx, t, rs, "bin", tok); n != 0 {
			t.Fatalf("binary key was truncated at the NUL byte")
		}
		if v := c.Do("LOCK", key, "10000"); v != nil {
			t.Fatalf("second LOCK of the binary key = %#v, want null", v)
		}
		if v := c.Do("UNLOCK", key, tok); v != int64(1) {
			t.Fatalf("UNLOCK of the binary key = %#v, want 1", v)
		}
		// UNLOCK answers at the quorum; the last delete lands a moment later.
		testkit.Eventually(t, 5*time.Second, "the binary key gone from every backend after UNLOCK", func() bool {
			return holders(ctx, t, rs, key, tok) == 0
		})
		// Through go-redis as well.
		gc := p.Client(nil)
		r := mustLock(ctx, t, gc, key, 10000)
		if n := unlock(ctx, t, gc, key, r.Token); n != 1 {
			t.Fatalf("go-redis UNLOCK of the binary key = %d", n)
		}
	})

	t.Run("argument errors keep the connection", func(t *testing.T) {
		c := testkit.Dial(t, p.Addr())
		if v := c.Do("LOCK", "k"); v != testkit.Error("ERR wrong number of arguments for 'lock' command") {
			t.Fatalf("LOCK k = %#v", v)
		}
		if v := c.Do("LOCK", "k", "ten"); v != testkit.Error("ERR value is not an integer or out of range") {
			t.Fatalf("LOCK k ten = %#v", v)
		}
		if v := c.Do("LOCK", "k", "1000\x00"); v != testkit.Error("ERR value is not an integer or out of range") {
			t.Fatalf("LOCK k 1000\\x00 = %#v", v)
		}
		if v := c.Do("LOCK", "k", " 1000"); v != testkit.Error("ERR value is not an integer or out of range") {
			t.Fatalf("LOCK k ' 1000' = %#v", v)
		}
		if v := c.Do("UNLOCK"); v != testkit.Error("ERR wrong number of arguments for 'unlock' command") {
			t.Fatalf("UNLOCK = %#v", v)
		}
		if v := c.Do("PING"); v != "PONG" {
			t.Fatalf("PING after argument errors = %#v", v)
		}
	})

	t.Run("empty and odd inline input", func(t *testing.T) {
		c := testkit.Dial(t, p.Addr())
		c.Send([]byte("\r\n\r\n  \r\nPING\r\n"))
		if v := c.ReadReply(); v != "PONG" {
			t.Fatalf("PING after blank inline lines = %#v", v)
		}
		c.Send([]byte("*0\r\nPING\r\n"))
		if v := c.ReadReply(); v != "PONG" {
			t.Fatalf("PING after *0 = %#v", v)
		}
	})

	t.Run("proxy survived", func(t *testing.T) {
		ctx := testCtx(t, 10*time.Second)
		if !p.Alive() {
			t.Fatal("the proxy process exited")
		}
		if err := p.Client(nil).Ping(ctx).Err(); err != nil {
			t.Fatalf("PING after the bad input: %v", err)
		}
		if strings.Contains(strings.ToLower(p.Log()), "panic") {
			t.Fatalf("the proxy log mentions a panic:\n%s", p.Log())
		}
	})
}

type lockResult struct {
	token string
	err   error
}

// mustLockNoFatal locks key for use from goroutines other than the test's.
func mustLockNoFatal(ctx context.Context, c *redis.Client, key string) lockResult {
	v, err := c.Do(ctx, "LOCK", key, 10000).Slice()
	if err != nil {
		return lockResult{err: err}
	}
	if len(v) != 3 {
		return lockResult{err: errors.New("LOCK reply is not an array of 3")}
	}
	tok, _ := v[0].(string)
	return lockResult{token: tok}
}
