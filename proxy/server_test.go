package proxy

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/redlocktest"
	"github.com/redlock-proxy/redlock-proxy/tests/testkit"
)

// startServer serves on 127.0.0.1:0 over three miniredis backends. With
// nilLocker the dispatcher has no locker, so lock commands panic: that is
// how the panic recovery is exercised.
func startServer(t *testing.T, cfg Config, pass string, nilLocker bool) *Server {
	t.Helper()
	logger := redlocktest.Logger(t)
	var leases *lease.Manager
	if !nilLocker {
		locker, _ := redlocktest.New(t, 3, redlock.Options{Logger: logger})
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

// dialServer is a raw RESP connection to s.
func dialServer(t *testing.T, s *Server) *testkit.Conn {
	t.Helper()
	return testkit.Dial(t, s.Addr().String())
}

// holdLock takes key for 30 s through a new connection to s, and returns
// that connection and the token.
func holdLock(t *testing.T, s *Server, key string) (*testkit.Conn, string) {
	t.Helper()
	holder := dialServer(t, s)
	held, ok := holder.Do("LOCK", key, "30000").([]any)
	if !ok || len(held) != 3 {
		t.Fatalf("LOCK %s = %#v", key, held)
	}
	return holder, held[0].(string)
}

// waitBlocked polls s until one client waits in a blocking command.
func waitBlocked(t *testing.T, s *Server) {
	t.Helper()
	probe := dialServer(t, s)
	testkit.Eventually(t, 10*time.Second, "the WAIT to be queued", func() bool {
		info, _ := probe.Do("INFO", "clients").(string)
		return strings.Contains(info, "blocked_clients:1\r\n")
	})
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
	c := dialServer(t, s)
	c.SendCmd("HELLO", "3")
	if got := string(c.ReadRaw()); !strings.HasPrefix(got, "%7\r\n") || !strings.Contains(got, "$7\r\nmodules\r\n*0\r\n") {
		t.Fatalf("HELLO 3 = %q, want a map of 7 with modules, an empty array", got)
	}
	// The ttl is 5 s (each backend call gets 5% of it: 100 ms gave 5 ms,
	// which the race detector misses); what is tested is the null.
	c.SendCmd("EXTEND", "k", "t", "5000")
	if head := c.Peek(3); string(head) != "_\r\n" {
		t.Fatalf("RESP3 null = %q", head)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	s := startServer(t, Config{}, "", true)
	c := dialServer(t, s)
	c.Send([]byte("LOCK k 10000\r\n"))
	if got := c.ReadReply(); got != testkit.Error("ERR internal error") {
		t.Fatalf("panicking command = %#v", got)
	}
	c.Send([]byte("PING\r\n"))
	if got := c.ReadReply(); got != "PONG" {
		t.Fatalf("after panic PING = %#v", got)
	}
}

func TestMaxClients(t *testing.T) {
	s := startServer(t, Config{MaxClients: 2}, "", false)
	for range 2 {
		if got := dialServer(t, s).Do("PING"); got != "PONG" {
			t.Fatalf("PING = %#v", got)
		}
	}
	if got := dialServer(t, s).ReadReply(); got != testkit.Error(errMaxClients) {
		t.Fatalf("third client got %#v", got)
	}
}

// TestIdleTimeout: an idle client is disconnected after the idle timeout.
// No sleep: the server must close the connection, and the wait for that
// is bounded generously.
func TestIdleTimeout(t *testing.T) {
	s := startServer(t, Config{IdleTimeout: 100 * time.Millisecond}, "", false)
	c := dialServer(t, s)
	if got := c.Do("PING"); got != "PONG" {
		t.Fatalf("PING = %#v", got)
	}
	c.ExpectClosed(5 * time.Second)
}

func TestGuardClosesAbusiveClientOnly(t *testing.T) {
	s := startServer(t, Config{}, "s3cret", false)
	good := dialServer(t, s)
	if got := good.Do("AUTH", "s3cret"); got != "OK" {
		t.Fatalf("AUTH = %#v", got)
	}
	bad := dialServer(t, s)
	bad.Send([]byte("*1000\r\n"))
	if got := bad.ReadReply(); got != testkit.Error("ERR Protocol error: unauthenticated multibulk length") {
		t.Fatalf("pre-auth big multibulk = %#v", got)
	}
	bad.ExpectClosed(5 * time.Second)
	good.Send([]byte("*2\r\n$4\r\nLOCK\r\n$9223372036854775807\r\n"))
	if got := good.ReadReply(); got != testkit.Error("ERR Protocol error: invalid bulk length") {
		t.Fatalf("huge bulk = %#v", got)
	}
	other := dialServer(t, s)
	other.Send([]byte("AUTH s3cret\r\nPING\r\n"))
	if got := other.ReadReply(); got != "OK" {
		t.Fatalf("other client AUTH = %#v", got)
	}
	if got := other.ReadReply(); got != "PONG" {
		t.Fatalf("other client PING = %#v", got)
	}
}

// TestShutdownDrainsInFlight: Shutdown lets a blocked LOCK … WAIT finish
// with its reply before it returns, answers nothing new, and stops
// accepting.
func TestShutdownDrainsInFlight(t *testing.T) {
	s := startServer(t, Config{}, "", false)
	holder := dialServer(t, s)
	if got, ok := holder.Do("LOCK", "k", "10000", "TOKEN", "t1").([]any); !ok || len(got) != 3 {
		t.Fatalf("LOCK = %#v", got)
	}
	waiter := dialServer(t, s)
	// Long enough to be seen queued on a loaded machine.
	const wait = 2 * time.Second
	sent := time.Now()
	waiter.SendCmd("LOCK", "k", "10000", "WAIT", "2000")
	waitBlocked(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	// The WAIT cannot end before 2 s after it was sent: a Shutdown
	// that returns sooner did not wait for it.
	if el := time.Since(sent); el < wait {
		t.Fatalf("Shutdown returned %v after the WAIT %v was sent: it did not wait for it", el, wait)
	}
	if got := waiter.ReadReply(); got != nil {
		t.Fatalf("in-flight WAIT got %#v, want its null reply", got)
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
