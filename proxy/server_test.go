package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
)

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: logWriter{t}, Level: hclog.Debug})
}

// startServer serves on 127.0.0.1:0 over three miniredis backends. With
// nilLocker the dispatcher has no locker, so lock commands panic: that is
// how the panic recovery is exercised.
func startServer(t *testing.T, cfg Config, pass string, nilLocker bool) *Server {
	t.Helper()
	logger := testLogger(t)
	var leases *lease.Manager
	if !nilLocker {
		var nodes []redlock.Node
		for range 3 {
			m := miniredis.RunT(t)
			n, err := redlock.DialNode(m.Addr())
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
		}
		locker := redlock.New(nodes, redlock.Options{NodeTimeout: 200 * time.Millisecond, Logger: logger})
		t.Cleanup(func() { locker.Close(context.Background()); locker.CloseNodes() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if up := locker.Connect(ctx); up != len(nodes) {
			t.Fatalf("%d of %d backends connected", up, len(nodes))
		}
		leases = lease.New(lease.Options{Locker: locker, Logger: logger})
	}
	disp := commands.New(commands.Options{
		Leases: leases, MinTTL: 10 * time.Millisecond, MaxTTL: time.Minute,
		MaxWait: 5 * time.Second, RequirePass: pass, Logger: logger,
	})
	cfg.Listen = "127.0.0.1:0"
	cfg.RequirePass = pass != ""
	if cfg.Limits == (Limits{}) {
		cfg.Limits = Limits{MaxArgs: 1024, MaxBulkBytes: 1 << 20, MaxInlineBytes: 64 << 10}
	}
	s := New(cfg, disp, logger)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

// exchange sends raw bytes and reads one reply line (and, for a bulk,
// its payload) with a deadline.
func exchange(t *testing.T, c net.Conn, rd *bufio.Reader, send string) string {
	t.Helper()
	if send != "" {
		if _, err := c.Write([]byte(send)); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := rd.ReadString('\n')
	if err != nil {
		return "EOF:" + err.Error()
	}
	return line
}

func dialServer(t *testing.T, s *Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestGoRedisBothProtocols(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	ctx := context.Background()
	for _, proto := range []int{3, 2} {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: proto, MaxRetries: -1})
		defer rc.Close()
		res, err := rc.Do(ctx, "LOCK", "k", "5000").Slice()
		if err != nil || len(res) != 3 {
			t.Fatalf("proto %d: LOCK = %v, %v", proto, res, err)
		}
		if err := rc.Do(ctx, "LOCK", "k", "5000").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("proto %d: held LOCK err = %v, want redis.Nil", proto, err)
		}
		if n, err := rc.Do(ctx, "UNLOCK", "k", res[0]).Int(); err != nil || n != 1 {
			t.Fatalf("proto %d: UNLOCK = %d, %v", proto, n, err)
		}
		if got, _ := rc.Echo(ctx, "a\x00b\r\n").Result(); got != "a\x00b\r\n" {
			t.Fatalf("ECHO = %q", got)
		}
	}
}

func TestRESP3NullAndMap(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	c, rd := dialServer(t, s)
	if got := exchange(t, c, rd, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"); got != "%7\r\n" {
		t.Fatalf("HELLO 3 = %q", got)
	}
	for exchange(t, c, rd, "") != "modules\r\n" {
	}
	if got := exchange(t, c, rd, ""); got != "*0\r\n" {
		t.Fatalf("modules = %q", got)
	}
	if got := exchange(t, c, rd, "*4\r\n$6\r\nEXTEND\r\n$1\r\nk\r\n$1\r\nt\r\n$3\r\n100\r\n"); got != "_\r\n" {
		t.Fatalf("RESP3 null = %q", got)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	s := startServer(t, Config{}, "", true)
	c, rd := dialServer(t, s)
	if got := exchange(t, c, rd, "LOCK k 1000\r\n"); got != "-ERR internal error\r\n" {
		t.Fatalf("panicking command = %q", got)
	}
	if got := exchange(t, c, rd, "PING\r\n"); got != "+PONG\r\n" {
		t.Fatalf("after panic PING = %q", got)
	}
}

func TestMaxClients(t *testing.T) {
	s := startServer(t, Config{MaxClients: 2}, "", false)
	for range 2 {
		c, rd := dialServer(t, s)
		if got := exchange(t, c, rd, "PING\r\n"); got != "+PONG\r\n" {
			t.Fatalf("PING = %q", got)
		}
	}
	c, rd := dialServer(t, s)
	if got := exchange(t, c, rd, ""); got != "-"+errMaxClients+"\r\n" {
		t.Fatalf("third client got %q", got)
	}
}

func TestIdleTimeout(t *testing.T) {
	s := startServer(t, Config{IdleTimeout: 100 * time.Millisecond}, "", false)
	c, rd := dialServer(t, s)
	if got := exchange(t, c, rd, "PING\r\n"); got != "+PONG\r\n" {
		t.Fatalf("PING = %q", got)
	}
	time.Sleep(300 * time.Millisecond)
	if got := exchange(t, c, rd, ""); !strings.HasPrefix(got, "EOF:") {
		t.Fatalf("idle connection still open: %q", got)
	}
}

func TestGuardClosesAbusiveClientOnly(t *testing.T) {
	s := startServer(t, Config{}, "s3cret", false)
	good, grd := dialServer(t, s)
	if got := exchange(t, good, grd, "AUTH s3cret\r\n"); got != "+OK\r\n" {
		t.Fatalf("AUTH = %q", got)
	}
	bad, brd := dialServer(t, s)
	if got := exchange(t, bad, brd, "*1000\r\n"); got != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
		t.Fatalf("pre-auth big multibulk = %q", got)
	}
	if _, err := brd.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("connection not closed: %v", err)
	}
	if got := exchange(t, good, grd, "*2\r\n$4\r\nLOCK\r\n$9223372036854775807\r\n"); got != "-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("huge bulk = %q", got)
	}
	other, ord := dialServer(t, s)
	if got := exchange(t, other, ord, "AUTH s3cret\r\nPING\r\n"); got != "+OK\r\n" {
		t.Fatalf("other client AUTH = %q", got)
	}
	if got := exchange(t, other, ord, ""); got != "+PONG\r\n" {
		t.Fatalf("other client PING = %q", got)
	}
}

func TestShutdownDrainsInFlight(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	holder, hrd := dialServer(t, s)
	if got := exchange(t, holder, hrd, "LOCK k 10000 TOKEN t1\r\n"); got != "*3\r\n" {
		t.Fatalf("LOCK = %q", got)
	}
	waiter, wrd := dialServer(t, s)
	waiter.Write([]byte("LOCK k 1000 WAIT 300\r\n"))
	time.Sleep(50 * time.Millisecond) // the WAIT is now in flight
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("Shutdown did not wait for the in-flight WAIT (%v)", el)
	}
	if got := exchange(t, waiter, wrd, ""); got != "*-1\r\n" {
		t.Fatalf("in-flight WAIT got %q, want its null reply", got)
	}
	if got := exchange(t, holder, hrd, ""); !strings.HasPrefix(got, "$") {
		t.Fatalf("rest of LOCK reply = %q", got)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5": true, "[::1]:5": true, "10.0.0.1:5": false, "junk": false,
	} {
		if isLoopback(addr) != want {
			t.Errorf("isLoopback(%q) != %v", addr, want)
		}
	}
}
