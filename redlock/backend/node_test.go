package backend

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

func TestDialNode(t *testing.T) {
	for _, tc := range []struct {
		url, addr string
		db        int
		tls       bool
	}{
		{"127.0.0.1:6379", "127.0.0.1:6379", 0, false},
		{"redis://10.0.0.1:7000", "10.0.0.1:7000", 0, false},
		{"redis://user:secret@10.0.0.1:7000/2", "10.0.0.1:7000", 2, false},
		{"rediss://:secret@db.example:6380", "db.example:6380", 0, true},
	} {
		n, err := DialNode(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		o := n.opts
		if n.Addr() != tc.addr || o.DB != tc.db || n.DB() != tc.db || (o.TLSConfig != nil) != tc.tls {
			t.Errorf("%s: addr %q db %d (DB() %d) tls %v", tc.url, n.Addr(), o.DB, n.DB(), o.TLSConfig != nil)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"http://h:1", "redis://:hunter2@h:1/notadb", "redis://u:hunter2@[::1"} {
		_, err := DialNode(bad)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", bad, err)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error leaks the password: %v", bad, err)
		}
	}
}

func TestRedisNode(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireAuth("s3cret")
	n, err := DialNode("redis://:s3cret@" + mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	check := func(op string, got bool, err error, want bool) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s = %v, %v; want %v", op, got, err, want)
		}
	}
	ok, _, err := n.SetNX(ctx, "k", "v", 1500*time.Microsecond)
	check("SetNX", ok, err, true)
	if got := mr.TTL("k"); got != 2*time.Millisecond {
		t.Fatalf("ttl %v, want 2ms (rounded up)", got)
	}
	ok, _, err = n.SetNX(ctx, "k", "w", time.Second)
	check("SetNX existing", ok, err, false)
	for range 2 { // the second run goes through EVALSHA
		ok, err = n.CompareAndExpire(ctx, "k", "w", time.Minute)
		check("CompareAndExpire wrong", ok, err, false)
		ok, err = n.CompareAndExpire(ctx, "k", "v", time.Minute)
		check("CompareAndExpire", ok, err, true)
		if got := mr.TTL("k"); got != time.Minute {
			t.Fatalf("ttl %v, want 1m", got)
		}
	}
	ok, err = n.CompareAndDelete(ctx, "k", "w")
	check("CompareAndDelete wrong", ok, err, false)
	ok, err = n.CompareAndDelete(ctx, "k", "v")
	check("CompareAndDelete", ok, err, true)
	ok, err = n.CompareAndDelete(ctx, "k", "v")
	check("CompareAndDelete absent", ok, err, false)
	ok, err = n.CompareAndExpire(ctx, "k", "v", time.Second)
	check("CompareAndExpire absent", ok, err, false)
}

func TestRedisNodeDown(t *testing.T) {
	mr := miniredis.RunT(t)
	n, err := DialNode(mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// DialNode starts connecting at once; let it finish first (miniredis
	// races with itself when closed while it answers INFO).
	if err := n.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	mr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := n.SetNX(ctx, "k", "v", time.Second); err == nil {
		t.Fatal("SetNX on a closed server succeeded")
	}
}

func TestRedisNodeEvalDo(t *testing.T) {
	mr := miniredis.RunT(t)
	n, err := DialNode(mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	get := script.New(`return redis.call("GET", KEYS[1])`)
	for range 2 { // EVAL on NOSCRIPT, then EVALSHA
		if v, err := n.Eval(ctx, get, []string{"k"}); v != nil || err != nil {
			t.Fatalf("Eval of a nil reply = %v, %v", v, err)
		}
	}
	if v, err := n.Do(ctx, "SET", "k", "v"); v != resp.StatusOK || err != nil { // a simple string reads as a Status
		t.Fatalf("Do SET = %v, %v", v, err)
	}
	if v, err := n.Eval(ctx, get, []string{"k"}); v != "v" || err != nil {
		t.Fatalf("Eval = %v, %v", v, err)
	}
	if v, err := n.Do(ctx, "GET", "nope"); v != nil || err != nil {
		t.Fatalf("Do of a nil reply = %v, %v", v, err)
	}
	if _, err := n.Do(ctx, "NOSUCHCOMMAND"); err == nil {
		t.Fatal("Do of an unknown command succeeded")
	}
	// A command past InlineMax goes on the bulk connection: same answers.
	big := strings.Repeat("v", InlineMax)
	if v, err := n.Do(ctx, "RPUSH", "l", big, "x"); v != int64(2) || err != nil {
		t.Fatalf("Do RPUSH of %d bytes = %v, %v; want 2", len(big), v, err)
	}
	if v, err := n.Do(ctx, "GET", strings.Repeat("k", InlineMax)); v != nil || err != nil {
		t.Fatalf("Do GET of a long missing key = %v, %v; want nil", v, err)
	}
	var reply interface{ RedisError() } // what DoAll counts as an answer
	if _, err := n.Do(ctx, "INCR", "l", big); !errors.As(err, &reply) {
		t.Fatalf("Do of a long bad command: %v, want an error reply", err)
	}
	if script.New("return 1").Hash() != "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" {
		t.Fatal("Hash is not the SHA1 Redis uses")
	}
}

// TestSelfConnected: a TCP socket connected to itself is recognised; a
// normal connection is not.
func TestSelfConnected(t *testing.T) {
	self := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40001}
	other := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40002}
	if !selfConnected(addrConn{local: self, remote: &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 40001}}) {
		t.Fatal("a socket connected to itself was not recognised")
	}
	if selfConnected(addrConn{local: self, remote: other}) {
		t.Fatal("a normal connection counted as connected to itself")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := backendDialer(&redis.Options{})(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial a listening port: %v", err)
	}
	nc.Close()
}

// addrConn is a net.Conn with given addresses and nothing else.
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return c.local }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestConnectDialsAgain: Connect waits for its context, not for the first
// dial: a backend that comes up after a refused dial is connected (before,
// Connect returned the refusal, and a loaded machine's slow first dial
// failed a whole test setup).
func TestConnectDialsAgain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: the first dials are refused
	n, err := DialNode(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Connect(ctx) }()
	time.Sleep(300 * time.Millisecond)
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr(addr); err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	t.Cleanup(mr.Close)
	if err := <-done; err != nil {
		t.Fatalf("Connect = %v, want connected once the backend is up", err)
	}
}

// DialNode is DialNodeTLS without TLS settings.
func DialNode(rawurl string) (*RedisNode, error) {
	return DialNodeTLS(rawurl, nil)
}

// TestMillisRoundsUpWithoutWrapping: a ttl goes to a backend in whole
// milliseconds, rounded up; near the largest duration rounding up added
// to it and wrapped negative, which deleted the key it was sent for.
func TestMillisRoundsUpWithoutWrapping(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Millisecond, 1}, {1500 * time.Microsecond, 2}, {0, 0},
		{math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1},
	} {
		if got := Millis(tc.d); got != tc.want {
			t.Errorf("Millis(%d) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
